"""Job dependencies (issue 24, the core): ``put(..., after=)``, the waiting state, and the
release of a finished parent's children by every path that deletes it, on both backends."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import psycopg
import pytest

import sqlq
from sqlq.copy import copy
from tests.timing import FakeClock

pytestmark = [pytest.mark.both_apis, pytest.mark.sqlite3_driver]


def _reserve(q: sqlq.Queue, tube: str = "default") -> sqlq.Job:
    job = q.reserve(tube, timeout=0)
    assert job is not None
    return job


def _state(q: sqlq.Queue, job_id: int) -> str:
    return str(q.stats_job(job_id)["state"])


def _sync(q: Any) -> sqlq.Queue:
    """The Queue itself, also under an AsyncQueue bridge (its transaction() is async)."""
    aq = getattr(q, "aq", None)
    return q if aq is None else aq.queue  # type: ignore[no-any-return]


def _edges(q: sqlq.Queue) -> int:
    with _sync(q).transaction() as tx:
        return int(tx.execute("SELECT count(*) FROM sqlq_edges")[0][0])


# -- the waiting state -------------------------------------------------------------------------

def test_a_job_waits_until_every_parent_is_gone(q: sqlq.Queue) -> None:
    a, b = q.put(b"a", tube="p"), q.put(b"b", tube="p")
    child = q.put(b"child", after=[a, b])
    assert _state(q, child) == "waiting"
    peeked = q.peek(child)
    assert peeked is not None and peeked.state == "waiting"
    assert q.stats()["current-jobs-waiting"] == 1
    assert q.stats_tube("default")["current-jobs-waiting"] == 1
    assert q.stats_tube("default")["current-jobs-ready"] == 0
    assert q.stats_tube("p")["current-jobs-waiting"] == 0
    assert q.reserve(timeout=0) is None  # never reserved while waiting
    assert q.peek_ready("default") is None
    with pytest.raises(sqlq.Timeout):
        q.result(child, timeout=0)  # pending: it will run
    q.delete(a)
    assert _state(q, child) == "waiting"
    assert q.reserve(timeout=0) is None
    q.delete(b)
    assert _state(q, child) == "ready"
    assert q.stats()["current-jobs-waiting"] == 0
    assert _reserve(q).id == child
    assert _edges(q) == 0


def test_one_id_or_any_iterable_of_ids(q: sqlq.Queue) -> None:
    a = q.put(b"a")
    assert _state(q, q.put(b"x", after=a)) == "waiting"
    assert _state(q, q.put(b"y", after=(a, a))) == "waiting"  # the same parent once
    assert _state(q, q.put(b"z", after=iter([a]))) == "waiting"
    assert _state(q, q.put(b"w", after=[])) == "ready"  # no parents: an ordinary put
    q.delete(a)
    assert q.stats()["current-jobs-waiting"] == 0
    assert q.stats()["current-jobs-ready"] == 4


@pytest.mark.face
def test_bad_after_arguments(q: sqlq.Queue) -> None:
    for bad in ("1", b"1", 1.0, True, [1, "2"], object()):
        with pytest.raises(TypeError, match="after|job_id"):
            q.put(b"x", after=bad)  # type: ignore[arg-type]
    with pytest.raises(sqlq.JobNotFound):
        q.put(b"x", after=0)
    assert q.stats()["total-jobs"] == 0


def test_an_id_never_issued_raises_and_puts_nothing(q: sqlq.Queue) -> None:
    a = q.put(b"a")
    with pytest.raises(sqlq.JobNotFound):
        q.put(b"x", after=[a, a + 1000])
    with pytest.raises(sqlq.JobNotFound):
        q.put_many([b"x", b"y"], after=[a + 1000])
    assert q.stats()["total-jobs"] == 1
    assert q.stats()["current-jobs-waiting"] == 0
    assert _edges(q) == 0
    q.delete(a)  # the parent counted no dependents: nothing to release
    assert q.stats()["current-jobs-ready"] == 0


def test_parents_gone_at_put_count_as_finished(fq: sqlq.Queue, clock: FakeClock) -> None:
    a, b = fq.put(b"a"), fq.put(b"b")
    fq.delete(a)
    _reserve(fq).complete(b"done")
    ready = fq.put(b"ready", after=[a, b])
    assert _state(fq, ready) == "ready"
    delayed = fq.put(b"later", after=[a], delay=30)
    assert _state(fq, delayed) == "delayed"
    assert fq.stats_job(delayed)["time-left"] == 30
    one_left = fq.put(b"waits", after=[a, b, fq.put(b"c")])
    assert _state(fq, one_left) == "waiting"
    assert _edges(fq) == 1


def test_the_delay_counts_from_the_release(fq: sqlq.Queue, clock: FakeClock) -> None:
    parent = fq.put(b"p")
    child = fq.put(b"c", after=parent, delay=10, tube="kids")
    for _ in range(3):  # SQLite: the claims' DueCache now holds "nothing due in kids"
        assert fq.reserve("kids", timeout=0) is None
    clock.advance(100)  # the time the child waited does not count
    fq.delete(parent)
    assert _state(fq, child) == "delayed"
    assert fq.stats_job(child)["time-left"] == 10
    assert fq.reserve("kids", timeout=0) is None
    clock.advance(10)
    assert _reserve(fq, "kids").id == child


def test_put_many_after_waits_for_the_same_parents(q: sqlq.Queue) -> None:
    a, b = q.put(b"a", tube="p"), q.put(b"b", tube="p")
    kids = q.put_many([b"x", b"y", b"z"], after=[a, b], tube="kids", priority=5)
    assert [_state(q, k) for k in kids] == ["waiting"] * 3
    assert q.stats_tube("kids")["current-jobs-waiting"] == 3
    assert _edges(q) == 6
    q.delete(b)
    q.delete(a)
    assert [_state(q, k) for k in kids] == ["ready"] * 3
    assert [_reserve(q, "kids").id for _ in kids] == kids
    assert q.put_many([], after=[a]) == []


def test_a_chain_releases_one_link_at_a_time(q: sqlq.Queue) -> None:
    first = q.put(b"1")
    second = q.put(b"2", after=first)
    third = q.put(b"3", after=second)
    _reserve(q).delete()
    assert (_state(q, second), _state(q, third)) == ("ready", "waiting")
    assert _reserve(q).id == second
    q.delete(second)
    assert _state(q, third) == "ready"


def test_a_waiting_job_holds_its_unique_key(q: sqlq.Queue) -> None:
    """A put whose unique key is held (by a waiting job too) returns the holder's id and
    changes none of its parents."""
    a, b = q.put(b"a"), q.put(b"b")
    child = q.put(b"c", after=a, unique_key="k")
    assert q.put(b"c again", after=b, unique_key="k") == child
    assert q.put(b"c plain", unique_key="k") == child
    assert _edges(q) == 1
    q.delete(a)
    assert _state(q, child) == "ready"
    # once the holder is gone the key is free again, with after= as for any put
    q.delete(child)
    assert _state(q, q.put(b"d", after=b, unique_key="k")) == "waiting"


# -- every path that deletes a parent releases its children ------------------------------------

def _by_id(q: sqlq.Queue, parent: int) -> None:
    q.delete(parent)


def _holder_delete(q: sqlq.Queue, parent: int) -> None:
    _reserve(q, "p").delete()


def _holder_complete(q: sqlq.Queue, parent: int) -> None:
    _reserve(q, "p").complete(b"result")
    assert q.result(parent, timeout=0) == b"result"  # a completed parent's result stays


def _complete_by_id(q: sqlq.Queue, parent: int) -> None:
    q.complete(parent, b"r")


def _reserve_delete(q: sqlq.Queue, parent: int) -> None:
    job = _reserve(q, "p")
    assert q.reserve("other", timeout=0, delete=job) is None


def _reserve_many_delete(q: sqlq.Queue, parent: int) -> None:
    jobs = q.reserve_many(5, "p", timeout=0)
    assert q.reserve_many(5, "other", timeout=0, delete=jobs) == []


def _delete_many(q: sqlq.Queue, parent: int) -> None:
    q.delete_many(q.reserve_many(5, "p", timeout=0))


PATHS: dict[str, Callable[[sqlq.Queue, int], None]] = {
    "delete-by-id": _by_id, "holder-delete": _holder_delete,
    "holder-complete": _holder_complete, "complete-by-id": _complete_by_id,
    "reserve-delete": _reserve_delete, "reserve-many-delete": _reserve_many_delete,
    "delete-many": _delete_many,
}


@pytest.mark.parametrize("path", sorted(PATHS))
def test_every_delete_path_releases_the_children(q: sqlq.Queue, path: str) -> None:
    parent = q.put(b"p", tube="p")
    kids = [q.put(b"k1", tube="kids", after=parent),
            q.put(b"k2", tube="kids", after=[parent, q.put(b"other parent", tube="q")])]
    PATHS[path](q, parent)
    assert [_state(q, k) for k in kids] == ["ready", "waiting"]
    assert _reserve(q, "kids").id == kids[0]


def test_a_parent_named_twice_in_one_batch_is_deleted_once_and_not_lost(q: sqlq.Queue) -> None:
    """delete_many and reserve_many(delete=) of the same handle twice: as for any job,
    both name a live lease, so nothing is lost (found by the property test's model)."""
    for verb in ("delete_many", "reserve_many"):
        parent = q.put(b"p", tube="twice")
        child = q.put(b"c", tube="kids", after=parent)
        job = q.reserve("twice", timeout=0)
        assert job is not None and job.id == parent
        if verb == "delete_many":
            q.delete_many([job, job])
        else:
            assert q.reserve_many(1, "twice", timeout=0, delete=[job, job]) == []
        assert q.stats_job(child)["state"] == "ready"
        q.delete(child)


def test_a_buried_parent_is_not_gone(q: sqlq.Queue) -> None:
    parent = q.put(b"p", tube="p")
    child = q.put(b"c", after=parent)
    _reserve(q, "p").bury(reason="broken")
    assert _state(q, child) == "waiting"
    assert q.kick(10, "p") == 1
    assert _state(q, child) == "waiting"
    _reserve(q, "p").release(delay=5)  # released and delayed: still there
    assert _state(q, child) == "waiting"
    q.delete(parent)
    assert _state(q, child) == "ready"


def test_kick_and_reserve_job_never_touch_a_waiting_job(q: sqlq.Queue) -> None:
    parent = q.put(b"p", tube="p")
    child = q.put(b"c", after=parent)
    assert q.kick(10) == 0
    with pytest.raises(sqlq.JobNotFound):
        q.kick_job(child)
    with pytest.raises(sqlq.JobNotFound):
        q.reserve_job(child)
    assert _state(q, child) == "waiting"


def test_deleting_a_waiting_job_takes_its_edges(q: sqlq.Queue) -> None:
    a, b = q.put(b"a", tube="p"), q.put(b"b", tube="p")
    child = q.put(b"c", after=[a, b])
    grandchild = q.put(b"g", after=child)
    q.delete(child)  # a waiting job, itself a parent: its child is released
    assert q.peek(child) is None
    assert _state(q, grandchild) == "ready"
    assert _edges(q) == 0
    q.delete(a)
    q.delete(b)
    assert q.stats()["current-jobs-ready"] == 1


def test_a_blocked_reserve_wakes_when_a_child_is_released(q: sqlq.Queue) -> None:
    parent = q.put(b"p", tube="p")
    child = q.put(b"c", tube="kids", after=parent)
    got: list[Any] = []
    waiter = threading.Thread(target=lambda: got.append(q.reserve("kids", timeout=20)))
    waiter.start()
    time.sleep(0.3)  # the waiter is asleep
    started = time.monotonic()
    q.delete(parent)
    waiter.join(25)
    assert got and got[0] is not None and got[0].id == child
    assert time.monotonic() - started < 5  # woken by the commit, not by a fallback re-check


def test_a_blocked_reserve_in_another_queue_wakes(db_url: str) -> None:
    with sqlq.Queue(db_url, durability="normal") as producer, \
            sqlq.Queue(db_url, durability="normal") as worker:
        parent = producer.put(b"p", tube="p")
        child = producer.put(b"c", tube="kids", after=parent)
        got: list[Any] = []
        waiter = threading.Thread(
            target=lambda: got.append(worker.reserve("kids", timeout=20)))
        waiter.start()
        time.sleep(0.3)
        producer.delete(parent)
        waiter.join(25)
        assert got and got[0] is not None and got[0].id == child


def test_a_transaction_puts_a_child_with_its_parent(q: sqlq.Queue) -> None:
    with _sync(q).transaction() as tx:
        parent = tx.put(b"p", tube="p")
        child = tx.put(b"c", after=parent)
    assert _state(q, child) == "waiting"
    with pytest.raises(RuntimeError), _sync(q).transaction() as tx:
        tx.put(b"rolled back", after=parent)
        raise RuntimeError
    assert q.stats()["current-jobs-waiting"] == 1
    q.delete(parent)
    assert _state(q, child) == "ready"


# -- sqlq copy ---------------------------------------------------------------------------------

def test_copy_moves_waiting_jobs_and_edges(tmp_path: Any, pg_url: str) -> None:
    source = str(tmp_path / "src.db")
    with sqlq.Queue(source, durability="normal") as q:
        parent = q.put(b"p", tube="p")
        child = q.put(b"c", after=parent, delay=5)
    report = copy(source, pg_url)
    assert report.counts["edge"] == 1
    back = str(tmp_path / "back.db")
    copy(pg_url, back)
    for target in (pg_url, back):
        with sqlq.Queue(target, durability="normal") as t:
            assert t.stats_job(child)["state"] == "waiting"
            assert t.stats()["current-jobs-waiting"] == 1
    with sqlq.Queue(back, durability="normal") as t:
        t.delete(parent)
        assert t.stats_job(child)["state"] == "delayed"


# -- the cost of a delete without dependents ---------------------------------------------------

def _is_trigger(traced: str) -> bool:
    return traced.lstrip("- ").startswith("TRIGGER ")


@pytest.mark.sqlite_only
def test_sqlite_delete_without_dependents_costs_what_it_did(db_path: str) -> None:
    """SQLite's own trace (statements, and trigger programs as "TRIGGER name"): a delete
    of a job without dependents, by each path, is the record's insert (the record of
    finished jobs, issue 39) and the jobs' DELETE by id in one transaction (migration
    0009: a record no longer deletes its job through a trigger), firing only the triggers
    schema 9 had; a parent's delete runs its release on the side."""
    with sqlq.Queue(db_path, durability="normal") as q:
        q.put_many([b"x"] * 10)
        conn: Any = q._backend.db.conn  # type: ignore[attr-defined]
        traced: list[str] = []
        if hasattr(conn, "trace_v2"):  # apsw
            import apsw

            conn.trace_v2(apsw.SQLITE_TRACE_STMT, lambda e: traced.append(e["sql"]))
        else:  # Python's sqlite3
            conn.conn.set_trace_callback(traced.append)
        schema_9_triggers = {"TRIGGER sqlq_forget_attempts", "TRIGGER sqlq_keep_last_id",
                             "TRIGGER sqlq_forget_steps"}  # its WHEN: no steps, no probe

        def one_delete(delete: Callable[[], object]) -> None:
            traced.clear()
            delete()
            # (The sqlite3 driver reads changes() with a statement; apsw calls it.) A
            # trigger's own statements are traced too (they name the row as old.): the
            # count of a ready job's delete (migration 0005) runs inside
            # sqlq_forget_attempts, no trigger more.
            statements = [t.strip() for t in traced if not (_is_trigger(t) or "old." in t)
                          and t.strip() != "SELECT changes()"]
            assert len(statements) == 4, traced
            begin, record, delete_jobs, commit = statements
            assert (begin, commit) == ("BEGIN IMMEDIATE", "COMMIT")
            assert record.startswith("INSERT OR REPLACE INTO sqlq_finished")
            assert record.upper().count("SELECT") <= 2  # the jobs' row (and a JSON list)
            assert delete_jobs.startswith("DELETE FROM sqlq_jobs WHERE id")
            assert "state" not in delete_jobs  # by id: the record's insert checked the lease
            assert {t.lstrip("- ") for t in traced if _is_trigger(t)} <= schema_9_triggers

        job = _reserve(q)
        one_delete(job.delete)
        ready = q.peek_ready("default")
        assert ready is not None
        one_delete(lambda: q.delete(ready.id))
        jobs = q.reserve_many(2, timeout=0)
        one_delete(lambda: q.delete_many(jobs))

        parent = _reserve(q)
        child = q.put(b"child", after=parent.id)
        traced.clear()
        parent.delete()
        assert len([t for t in traced if not _is_trigger(t)]) > 1
        assert q.stats_job(child)["state"] == "ready"


@pytest.mark.pg_fresh  # ALTER DATABASE … SET track_functions
def test_postgres_delete_without_dependents_calls_no_release(pg_url: str) -> None:
    """PostgreSQL's function statistics: deletes by every path of jobs without dependents
    never call sqlq_release_children; a delete of a parent calls it once."""
    with psycopg.connect(pg_url, autocommit=True) as admin:
        admin.execute("SELECT pg_stat_reset()")
        dbname = admin.execute("SELECT current_database()").fetchone()[0]  # type: ignore[index]
        admin.execute(f'ALTER DATABASE "{dbname}" SET track_functions = \'pl\'')

    def calls() -> int:
        with psycopg.connect(pg_url, autocommit=True) as c:
            c.execute("SELECT pg_stat_clear_snapshot()")
            row = c.execute("SELECT coalesce(sum(calls), 0) FROM pg_stat_user_functions "
                            "WHERE funcname = 'sqlq_release_children'").fetchone()
            return int(row[0])  # type: ignore[index]

    with sqlq.Queue(pg_url, durability="normal") as q:
        q.put_many([b"x"] * 8)
        q.delete(q.put(b"by id"))
        _reserve(q).delete()
        _reserve(q).complete(b"r")
        job = _reserve(q)
        q.reserve(timeout=0, delete=job).delete()  # type: ignore[union-attr]
        q.delete_many(q.reserve_many(2, timeout=0))
        q.reserve_many(1, timeout=0, delete=q.reserve_many(1, timeout=0))
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and calls() != 0:
        time.sleep(0.2)
    assert calls() == 0
    with sqlq.Queue(pg_url, durability="normal") as q:
        parent = q.put(b"p")
        q.put(b"c", after=parent)
        q.delete(parent)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and calls() == 0:
        time.sleep(0.2)
    assert calls() == 1


# -- fan-in under concurrency (PostgreSQL: many sessions at once) -------------------------------

def test_concurrent_fan_in_releases_the_child_exactly_once(pg_url: str) -> None:
    n_parents, n_threads = 60, 6
    with sqlq.Queue(pg_url, durability="normal") as q:
        parents = q.put_many([b"p"] * n_parents, tube="p")
        child = q.put(b"child", tube="kids", after=parents)
        assert q.stats_job(child)["state"] == "waiting"
    start = threading.Barrier(n_threads)
    errors: list[BaseException] = []

    def finish(k: int) -> None:
        try:
            with sqlq.Queue(pg_url, durability="normal") as worker:
                start.wait()
                while True:
                    # three paths at once: reserve+delete, batch delete, delete-and-claim
                    if k % 3 == 0:
                        job = worker.reserve("p", timeout=0)
                        if job is None:
                            return
                        job.delete()
                    elif k % 3 == 1:
                        jobs = worker.reserve_many(3, "p", timeout=0)
                        if not jobs:
                            return
                        worker.delete_many(jobs)
                    else:
                        job = worker.reserve("p", timeout=0)
                        if job is None:
                            return
                        nxt = worker.reserve("p", timeout=0, delete=job)
                        if nxt is not None:
                            nxt.complete(b"")
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=finish, args=(k,)) for k in range(n_threads)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors, errors
    with psycopg.connect(pg_url) as c:
        row = c.execute("SELECT state, waiting_on FROM sqlq_jobs WHERE id = %s",
                        (child,)).fetchone()
        assert row == (0, 0)  # ready once: not stranded (> 0), not released twice (< 0)
        assert c.execute("SELECT count(*) FROM sqlq_edges").fetchone() == (0,)
    with sqlq.Queue(pg_url, durability="normal") as q:
        assert q.stats()["current-jobs-ready"] == 1
        assert _reserve(q, "kids").id == child


def test_a_put_racing_its_parents_delete_is_never_stranded(pg_url: str) -> None:
    """A parent deleted while a child is put after it: either the put sees it gone (the
    child is ready) or the delete sees the edge (and releases it); never waiting."""
    rounds = 40
    with sqlq.Queue(pg_url, durability="normal") as producer, \
            sqlq.Queue(pg_url, durability="normal") as deleter:
        for _ in range(rounds):
            parent = producer.put(b"p", tube="p")
            go = threading.Barrier(2)
            kid: list[int] = []

            def put_child(parent: int, go: threading.Barrier, kid: list[int]) -> None:
                go.wait()
                kid.append(producer.put(b"c", tube="kids", after=parent))

            t = threading.Thread(target=put_child, args=(parent, go, kid))
            t.start()
            go.wait()
            deleter.delete(parent)
            t.join(10)
            assert producer.stats_job(kid[0])["state"] == "ready"
            producer.delete(kid[0])


# -- sqlq.put(conn, ..., after=): the application's own connection -----------------------------

def test_sqlq_put_after_through_a_stdlib_connection(app_file: str) -> None:
    import sqlite3

    conn = sqlite3.connect(app_file, isolation_level=None)
    try:
        parent = sqlq.put(conn, b"p", tube="p")
        child = sqlq.put(conn, b"c", after=parent)
        kids = sqlq.put_many(conn, [b"x", b"y"], after=[parent, child])
        with pytest.raises(sqlq.JobNotFound):
            sqlq.put(conn, b"never", after=parent + 100)
        conn.execute("BEGIN")
        sqlq.put(conn, b"rolled back", after=parent)
        conn.execute("ROLLBACK")
    finally:
        conn.close()
    with sqlq.Queue(app_file, durability="normal") as q:
        assert [_state(q, j) for j in (child, *kids)] == ["waiting"] * 3
        assert _edges(q) == 5
        q.delete(parent)
        assert [_state(q, j) for j in (child, *kids)] == ["ready", "waiting", "waiting"]
        _reserve(q).delete()
        assert [_state(q, j) for j in kids] == ["ready", "ready"]


def test_sqlq_put_after_through_psycopg(pg_url: str) -> None:
    with psycopg.connect(pg_url) as conn:
        with sqlq.Queue(pg_url, durability="normal") as q:
            parent = q.put(b"p", tube="p")
        with conn.transaction():
            child = sqlq.put(conn, b"c", after=[parent])
            kids = sqlq.put_many(conn, [b"x"], after=parent)
        with pytest.raises(sqlq.JobNotFound):
            sqlq.put(conn, b"never", after=parent + 100)
        conn.rollback()
    with sqlq.Queue(pg_url, durability="normal") as q:
        assert [_state(q, j) for j in (child, *kids)] == ["waiting"] * 2
        q.delete(parent)
        assert [_state(q, j) for j in (child, *kids)] == ["ready"] * 2
