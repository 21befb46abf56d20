"""Control of running jobs (issue 25): ``q.cancel``, ``sqlq.JobCancelled``, ``job.progress``
and its readers, on both backends (and through the AsyncQueue bridge)."""

from __future__ import annotations

import threading
from typing import Any

import pytest

import sqlq
from tests.timing import PATIENCE, FakeClock

pytestmark = [pytest.mark.both_apis]


def _reserve(q: sqlq.Queue, tube: str = "default") -> sqlq.Job:
    job = q.reserve(tube, timeout=0)
    assert job is not None
    return job


def _sync(q: Any) -> sqlq.Queue:
    """The Queue itself, also under an AsyncQueue bridge."""
    aq = getattr(q, "aq", None)
    return q if aq is None else aq.queue  # type: ignore[no-any-return]


def _cancelled_rows(q: sqlq.Queue) -> int:
    with _sync(q).transaction() as tx:
        return int(tx.execute("SELECT count(*) FROM sqlq_cancelled")[0][0])


# -- cancel: jobs that are not running ---------------------------------------------------------

@pytest.mark.parametrize("state", ["ready", "delayed", "buried"])
def test_cancel_deletes_a_job_that_is_not_reserved(q: sqlq.Queue, state: str) -> None:
    keep = q.put(b"keep")
    jid = q.put(b"x", delay=60 if state == "delayed" else 0)
    if state == "buried":
        q.put(b"", tube="other")
        job = _reserve(q)
        assert job.id == keep
        job.release()
        buried = q.reserve_job(jid)
        buried.bury()
    assert q.stats_job(jid)["state"] == state
    q.cancel(jid)
    assert q.peek(jid) is None
    with pytest.raises(sqlq.JobNotFound):
        q.stats_job(jid)
    assert _cancelled_rows(q) == 0  # nothing to remember: nobody holds it
    assert _reserve(q).id == keep  # the other job is untouched


def test_cancel_of_a_waiting_job_takes_its_edges(q: sqlq.Queue) -> None:
    parent = q.put(b"parent", tube="p")
    child = q.put(b"child", after=[parent])
    grandchild = q.put(b"grandchild", after=[child])
    q.cancel(child)  # as delete: a parent gone counts as finished
    assert q.peek(child) is None
    assert q.stats_job(grandchild)["state"] == "ready"
    q.delete(parent)  # its edge to the cancelled child went with it: nothing to release
    assert q.stats_tube("default")["current-jobs-ready"] == 1


def test_cancel_of_an_unknown_or_finished_job_raises_job_not_found(q: sqlq.Queue) -> None:
    with pytest.raises(sqlq.JobNotFound):
        q.cancel(12345)
    jid = q.put(b"x")
    _reserve(q).delete()
    with pytest.raises(sqlq.JobNotFound):
        q.cancel(jid)
    with pytest.raises(TypeError):
        q.cancel("7")  # type: ignore[arg-type]


def test_cancel_frees_a_unique_key(q: sqlq.Queue) -> None:
    jid = q.put(b"x", unique_key="k")
    _reserve(q)
    q.cancel(jid)
    assert q.put(b"y", unique_key="k") != jid


# -- cancel: a reserved job --------------------------------------------------------------------

@pytest.mark.parametrize("verb", ["touch", "delete", "release", "bury", "complete", "progress",
                                  "reserve-delete", "reserve-delete-lock-wait"])
def test_the_holder_of_a_cancelled_job_gets_job_cancelled(q: sqlq.Queue, verb: str) -> None:
    """Also the worker's delete-and-claim (``reserve(delete=job)``), on PostgreSQL one
    statement; with a lock wait set, through a transaction pool (SQLQ_TEST_PG_POOL), that
    statement runs inside a transaction its failure aborts (migration 0007 says why)."""
    if verb.endswith("lock-wait"):
        q.lock_wait = 5
    other = q.put(b"other")
    jid = q.put(b"x", priority=1)
    job = _reserve(q)
    assert job.id == jid
    q.cancel(jid)
    assert q.peek(jid) is None
    call = {"touch": lambda: job.touch(), "delete": lambda: job.delete(),
            "release": lambda: job.release(), "bury": lambda: job.bury(reason="no"),
            "complete": lambda: job.complete(b"r"), "progress": lambda: job.progress(0.5),
            "reserve-delete": lambda: q.reserve(timeout=0, delete=job),
            "reserve-delete-lock-wait": lambda: q.reserve(timeout=0, delete=job)}
    with pytest.raises(sqlq.JobCancelled) as caught:
        call[verb]()
    assert isinstance(caught.value, sqlq.JobLost)
    assert caught.value.job_ids == (jid,)
    # Never run again, and nothing else was lost: the other job is the only one.
    assert _reserve(q).id == other
    assert q.reserve(timeout=0) is None
    with pytest.raises(sqlq.JobNotFound):
        q.result(jid, timeout=0)


def test_a_cancelled_job_never_comes_back_after_its_lease(fq: sqlq.Queue,
                                                         clock: FakeClock) -> None:
    jid = fq.put(b"x", ttr=5)
    job = _reserve(fq)
    fq.cancel(jid)
    clock.advance(6)  # the lease has run out: an expired reservation would be ready now
    assert fq.reserve(timeout=0) is None
    assert fq.peek(jid) is None
    assert fq.stats()["current-jobs-ready"] == 0
    with pytest.raises(sqlq.JobCancelled):  # told why for an hour past the lease
        job.delete()
    clock.advance(3600)
    with pytest.raises(sqlq.JobLost):
        job.delete()
    fq.cancel(fq.put(b"y"))  # a cancel purges what it no longer needs to remember
    assert _cancelled_rows(fq) == 0


def test_a_cancelled_job_is_not_handed_to_the_next_holder(q: sqlq.Queue) -> None:
    """Released by a dead holder's cleanup or reserved by id: it is gone either way."""
    jid = q.put(b"x")
    _reserve(q)
    q.cancel(jid)
    with pytest.raises(sqlq.JobNotFound):
        q.reserve_job(jid)
    with pytest.raises(sqlq.JobNotFound):
        q.cancel(jid)  # no longer live


def test_cancel_of_a_reserved_parent_releases_its_children(q: sqlq.Queue) -> None:
    parent = q.put(b"parent", tube="p")
    child = q.put(b"child", after=[parent])
    job = _reserve(q, "p")
    q.cancel(parent)
    assert q.stats_job(child)["state"] == "ready"
    with pytest.raises(sqlq.JobCancelled):
        job.touch()


def test_a_lease_lost_otherwise_is_still_job_lost(fq: sqlq.Queue, clock: FakeClock) -> None:
    fq.put(b"x", ttr=1)
    first = _reserve(fq)
    clock.advance(2)
    second = _reserve(fq)
    with pytest.raises(sqlq.JobLost) as caught:
        first.delete()
    assert not isinstance(caught.value, sqlq.JobCancelled)
    second.delete()


def test_a_batch_delete_names_a_cancelled_job_as_lost(q: sqlq.Queue) -> None:
    ids = q.put_many([b"a", b"b", b"c"])
    jobs = q.reserve_many(3, timeout=0)
    q.cancel(ids[1])
    with pytest.raises(sqlq.JobLost) as caught:
        q.delete_many(jobs)
    assert caught.value.job_ids == (ids[1],)
    assert q.stats()["current-jobs-reserved"] == 0
    assert q.reserve(timeout=0) is None


# -- progress ----------------------------------------------------------------------------------

def test_progress_is_stored_with_the_job_and_read_by_anyone(q: sqlq.Queue) -> None:
    jid = q.put(b"x")
    assert q.stats_job(jid)["progress"] == ""
    assert q.stats_job(jid)["progress-message"] == ""
    job = _reserve(q)
    job.progress(0.25, "resizing 1 of 4")
    stats = q.stats_job(jid)
    assert stats["progress"] == 0.25 and stats["progress-message"] == "resizing 1 of 4"
    job.progress(37)  # a count stays an int
    stats = q.stats_job(jid)
    assert stats["progress"] == 37 and isinstance(stats["progress"], int)
    assert stats["progress-message"] == ""
    job.progress(1.0, "done")
    assert q.stats_job(jid)["progress"] == 1.0


@pytest.mark.face
@pytest.mark.parametrize(("value", "message", "error"), [
    (1.5, None, ValueError), (-0.1, None, ValueError), (float("nan"), None, ValueError),
    (-1, None, ValueError), (True, None, TypeError), ("0.5", None, TypeError),
    (0.5, 7, TypeError), (0.5, "x" * 1025, ValueError)])
def test_bad_progress_is_refused_and_changes_nothing(q: sqlq.Queue, value: Any, message: Any,
                                                     error: type[Exception]) -> None:
    jid = q.put(b"x")
    job = _reserve(q)
    job.progress(0.5, "half")
    with pytest.raises(error):
        job.progress(value, message)
    assert q.stats_job(jid)["progress"] == 0.5
    assert q.stats_job(jid)["progress-message"] == "half"


def test_progress_needs_the_live_lease(fq: sqlq.Queue, clock: FakeClock) -> None:
    jid = fq.put(b"x", ttr=1)
    job = _reserve(fq)
    clock.advance(2)
    with pytest.raises(sqlq.JobLost):
        job.progress(0.5)
    with pytest.raises(sqlq.JobNotFound):
        fq.progress(jid, 0.5)  # by id: the job is not reserved
    with pytest.raises(ValueError):
        fq.peek(jid).progress(0.5)  # type: ignore[union-attr]  # a peeked job holds no lease


def test_result_waiters_see_progress_as_it_changes(q: sqlq.Queue) -> None:
    jid = q.put(b"x")
    job = _reserve(q)
    seen: list[tuple[Any, str]] = []
    got = threading.Event()
    outcome: list[bytes] = []

    def on_progress(value: Any, message: str) -> None:
        seen.append((value, message))
        got.set()

    def wait() -> None:
        outcome.append(q.result(jid, timeout=PATIENCE, on_progress=on_progress))

    job.progress(0.1, "started")
    waiter = threading.Thread(target=wait)
    waiter.start()
    assert got.wait(PATIENCE)
    got.clear()
    job.progress(0.9, "nearly")
    assert got.wait(PATIENCE)
    job.complete(b"42")
    waiter.join(PATIENCE)
    assert outcome == [b"42"]
    assert seen == [(0.1, "started"), (0.9, "nearly")]
