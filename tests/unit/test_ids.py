"""Job ids are never issued twice (results are keyed by id, beanstalkd clients hold ids,
total-jobs counts them): not after the job holding the highest id is deleted, by any verb
that deletes, nor once the file is closed and opened again. (A SIGKILL mid-put:
tests/integration/test_durability.py.)"""

from __future__ import annotations

from collections.abc import Callable

import pytest

import sqlq

#: Every way the job holding the highest id leaves the table.
DELETES: dict[str, Callable[[sqlq.Queue, int], None]] = {
    "delete by id": lambda q, job_id: q.delete(job_id),
    "reserve, then job.delete()": lambda q, job_id: _reserved(q).delete(),
    "reserve_many, then delete_many": lambda q, job_id: q.delete_many(q.reserve_many(10)),
    "reserve(delete=job)": lambda q, job_id: _ignore(q.reserve(delete=_reserved(q), timeout=0)),
    "complete": lambda q, job_id: _reserved(q).complete(b"done"),
}


def _reserved(q: sqlq.Queue) -> sqlq.Job:
    job = q.reserve(timeout=0)
    assert job is not None
    return job


def _ignore(job: sqlq.Job | None) -> None:
    """The next job, if any, stays reserved: only the deletion matters here."""


@pytest.mark.parametrize("how", sorted(DELETES))
@pytest.mark.parametrize("left", ["some jobs left", "none left"])
def test_the_top_id_is_not_issued_again_after_a_delete_and_a_reopen(
        db_url: str, how: str, left: str) -> None:
    q = sqlq.Queue(db_url, durability="normal")
    try:
        if left == "some jobs left":
            q.put(b"stays", priority=2**32 - 1)  # claimed last: never the one deleted
        top = q.put_many([b"a", b"b"])[-1] if left == "none left" else q.put(b"top")
        if left == "none left":
            q.delete(top - 1)
        DELETES[how](q, top)
        assert q.stats()["total-jobs"] == top
        assert q.put(b"next") == top + 1
        q.delete(top + 1)
    finally:
        q.close()
    with sqlq.Queue(db_url, durability="normal") as again:
        assert again.stats()["total-jobs"] == top + 1
        assert again.put(b"after reopening") == top + 2


@pytest.mark.sqlite_only
def test_a_put_many_after_the_top_job_went_continues_the_ids(q: sqlq.Queue) -> None:
    ids = q.put_many([b"x"] * 5)
    for job_id in ids[2:]:
        q.delete(job_id)
    assert q.put_many([b"y"] * 3) == [ids[-1] + 1, ids[-1] + 2, ids[-1] + 3]


def test_total_jobs_after_a_rolled_back_put(q: sqlq.Queue, backend: str) -> None:
    """SQLite counts the puts that committed; PostgreSQL counts the ids its sequence
    issued, and a rolled-back put used one up (docs/postgres.md, "Ids"; queries.sql, total_jobs:
    an exact count would be a counter row that every put's commit waits on)."""
    q.put(b"kept")
    with pytest.raises(RuntimeError), q.transaction() as tx:
        tx.put(b"rolled back")
        raise RuntimeError("the application's transaction fails")
    third = q.put(b"kept too")
    assert q.stats()["total-jobs"] == third == (2 if backend == "sqlite" else 3)


@pytest.mark.parametrize("n", [15, 16, 17, 63, 64, 65, 100])
def test_put_many_numbers_its_bodies_in_order(q: sqlq.Queue, n: int) -> None:
    """SQLite inserts a batch 16 rows a statement and the rest one by one (queries.sql
    insert_jobs_at): every body gets the next id, in order, with the batch's options."""
    first = q.put(b"before")
    bodies = [f"body {i}".encode() for i in range(n)]
    ids = q.put_many(bodies, tube="nums", priority=7, delay=n % 2)
    assert ids == list(range(first + 1, first + 1 + n))
    for job_id, body in zip(ids, bodies, strict=True):
        job = q.peek(job_id)
        assert job is not None
        assert (job.body, job.tube, job.priority) == (body, "nums", 7)
        assert job.state == ("delayed" if n % 2 else "ready")
    state = "delayed" if n % 2 else "ready"
    assert q.stats_tube("nums")[f"current-jobs-{state}"] == n
    assert q.put(b"after") == first + n + 1
