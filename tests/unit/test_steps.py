"""Durable steps, cursors and snooze (issue 40, sqlq/steps.py) on every backend and both
APIs: a step's fn runs once per job, its value kept under the job's live lease only;
cursors resume; a snooze counts no attempt; the rows go with the job and are bounded."""

from __future__ import annotations

import asyncio
import sqlite3
import time
from pathlib import Path
from typing import Any

import pytest

import sqlq
from sqlq import steps as steps_module
from sqlq.copy import copy
from tests.conftest import is_postgres
from tests.timing import FakeClock

pytestmark = pytest.mark.both_apis  # q and fq: as a Queue, then as an AsyncQueue


def _reserve(q: sqlq.Queue) -> sqlq.Job:
    job = q.reserve(timeout=0)
    assert job is not None
    return job


def _names(q: sqlq.Queue, job_id: int) -> list[str]:
    return [s["name"] for s in q.stats_job(job_id)["steps"]]


def test_a_step_runs_once_per_job_and_later_runs_get_its_value(q: sqlq.Queue) -> None:
    jid = q.put(b"x")
    calls: list[int] = []

    def charge(n: int, *, times: int = 1) -> dict[str, Any]:
        calls.append(n)
        return {"charged": n * times, "pair": (n, times)}

    job = _reserve(q)
    first = job.step("charge", charge, 7, times=2)
    assert first == {"charged": 14, "pair": [7, 2]}  # as its JSON gives it back
    assert job.step("charge", charge, 8) == first and calls == [7]
    job.release()
    again = _reserve(q)
    assert again.id == jid
    assert again.step("charge", charge, 9) == first and calls == [7]
    [step] = again.steps
    assert step["name"] == "charge" and step["value"] == first
    assert step["finished_at"] > 0


def test_a_cursor_resumes_where_the_last_run_saved_it(q: sqlq.Queue) -> None:
    q.put(b"x")
    job = _reserve(q)
    assert job.cursor("row") is None and job.cursor("row", 0) == 0
    for n in range(1, 4):
        job.save_cursor("row", n)
    assert job.cursor("row") == 3
    job.release()
    again = _reserve(q)
    assert again.cursor("row", 0) == 3
    info = q.stats_job(again.id)
    assert [(c["name"], c["value"]) for c in info["cursors"]] == [("row", 3)]
    assert info["steps"] == [] and again.steps == []


def test_a_snooze_counts_no_attempt_and_keeps_the_steps(fq: sqlq.Queue, clock: FakeClock) -> None:
    jid = fq.put(b"x")
    job = _reserve(fq)
    job.step("one", lambda: 1)
    job.save_cursor("at", 5)
    job.snooze(30)
    info = fq.stats_job(jid)
    assert info["state"] == "delayed" and info["reserves"] == 0 and info["releases"] == 0
    assert fq.reserve(timeout=0) is None
    clock.advance(31)
    again = _reserve(fq)
    assert again.id == jid and again.reserves == 1  # the first attempt, still
    assert again.step("one", lambda: 2) == 1 and again.cursor("at") == 5
    with pytest.raises(sqlq.JobLost):
        job.snooze(1)  # the first reservation's lease is long gone


def test_a_lost_lease_records_nothing(fq: sqlq.Queue, clock: FakeClock) -> None:
    jid = fq.put(b"x", ttr=5)
    job = _reserve(fq)
    job.step("early", lambda: "kept")
    clock.advance(6)  # the TTR ran out: another worker takes the job
    holder = _reserve(fq)
    with pytest.raises(sqlq.JobLost):
        job.step("late", lambda: "lost")
    with pytest.raises(sqlq.JobLost):
        job.save_cursor("row", 1)
    assert _names(fq, jid) == ["early"] and fq.stats_job(jid)["cursors"] == []
    assert holder.step("late", lambda: "holder's") == "holder's"


def test_a_cancelled_job_records_nothing(q: sqlq.Queue) -> None:
    jid = q.put(b"x")
    job = _reserve(q)
    q.cancel(jid)
    with pytest.raises(sqlq.JobCancelled):
        job.step("after", lambda: 1)


def test_steps_go_with_their_job(q: sqlq.Queue) -> None:
    ids = [q.put(b"a"), q.put(b"b")]
    for _ in ids:
        job = _reserve(q)
        job.step("s", lambda: 1)
        job.save_cursor("c", 2)
        if job.id == ids[0]:
            job.delete()
        else:
            job.complete(b"done")
    for jid in ids:
        assert q.views.steps(jid) == []


def test_a_buried_and_kicked_job_keeps_its_steps(q: sqlq.Queue) -> None:
    jid = q.put(b"x")
    job = _reserve(q)
    job.step("s", lambda: "v")
    job.bury(reason="look at it")
    assert _names(q, jid) == ["s"]
    q.kick_job(jid)
    calls = []
    assert _reserve(q).step("s", lambda: calls.append(1)) == "v" and calls == []


def test_a_value_too_big_or_not_json_is_refused_and_nothing_is_recorded(q: sqlq.Queue) -> None:
    jid = q.put(b"x")
    job = _reserve(q)
    with pytest.raises(sqlq.JobTooBig, match="more than the maximum"):
        job.step("big", lambda: "x" * (steps_module.MAX_VALUE + 1))
    with pytest.raises(TypeError, match="cannot be stored as JSON"):
        job.save_cursor("odd", {1, 2})
    with pytest.raises(TypeError, match="cannot be stored as JSON"):
        job.step("nan", lambda: float("nan"))
    info = q.stats_job(jid)
    assert info["steps"] == [] and info["cursors"] == []


def test_past_the_most_steps_a_step_is_refused_unrun(q: sqlq.Queue,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(steps_module, "MAX_STEPS", 3)
    jid = q.put(b"x")
    job = _reserve(q)
    job.step("a", lambda: 1)
    job.save_cursor("b", 1)
    job.step("c", lambda: 1)
    calls = []
    with pytest.raises(sqlq.JobTooBig, match="3 steps and cursors"):
        job.step("d", lambda: calls.append(1))
    with pytest.raises(sqlq.JobTooBig, match="3 steps and cursors"):
        job.save_cursor("e", 1)
    job.save_cursor("b", 2)  # a cursor saved again takes no more room
    assert calls == [] and _names(q, jid) == ["a", "c"]
    assert job.cursor("b") == 2


def test_an_async_fn_is_awaited(q: sqlq.Queue) -> None:
    q.put(b"x")
    job = _reserve(q)
    calls: list[int] = []

    async def fetch(n: int) -> int:
        await asyncio.sleep(0)
        calls.append(n)
        return n * 2

    sync = job.ajob.sync if hasattr(job, "ajob") else job  # a Job, inside a coroutine

    async def task() -> tuple[int, int]:
        return await sync.step("fetch", fetch, 3), await sync.step("fetch", fetch, 4)

    assert asyncio.run(task()) == (6, 6) and calls == [3]


@pytest.mark.pg_fresh  # it makes a table
def test_steps_of_a_job_in_its_own_transaction_commit_with_its_write(q: sqlq.Queue) -> None:
    """step(conn=tx): the write and the record commit together, or neither does."""
    queue = q.queue if hasattr(q, "queue") else q  # the Queue under the async bridge
    with queue.transaction() as tx:
        tx.execute("CREATE TABLE ledger (n INTEGER)")
    jid = q.put(b"x")
    job = _reserve(q)
    sync = job.ajob.sync if hasattr(job, "ajob") else job
    insert = "INSERT INTO ledger (n) VALUES (1)"
    with pytest.raises(RuntimeError), queue.transaction() as tx:
        sync.step("write", tx.execute, insert, conn=tx)
        raise RuntimeError("the application rolls back")
    assert _names(q, jid) == []
    with queue.transaction() as tx:
        assert sync.step("write", tx.execute, insert, conn=tx) == []
        assert sync.step("write", tx.execute, insert, conn=tx) == []  # recorded: not run
    with queue.transaction() as tx:
        assert tx.execute("SELECT count(*) FROM ledger") == [(1,)]
    assert _names(q, jid) == ["write"]
    assert job.step("write", lambda: "not run") == []


@pytest.mark.pg_fresh  # it makes a table
def test_a_step_in_a_transaction_checks_the_lease_there(fq: sqlq.Queue,
                                                        clock: FakeClock) -> None:
    queue = fq.queue if hasattr(fq, "queue") else fq
    with queue.transaction() as tx:
        tx.execute("CREATE TABLE ledger (n INTEGER)")
    jid = fq.put(b"x", ttr=5)
    job = _reserve(fq)
    sync = job.ajob.sync if hasattr(job, "ajob") else job
    clock.advance(6)
    calls = []
    with pytest.raises(sqlq.JobLost), queue.transaction() as tx:
        sync.step("write", lambda: calls.append(tx.execute("INSERT INTO ledger VALUES (1)")),
                  conn=tx)
    with queue.transaction() as tx:
        assert tx.execute("SELECT count(*) FROM ledger") == [(0,)]
    assert calls == [] and _names(fq, jid) == []


@pytest.mark.face
@pytest.mark.parametrize(("name", "error"), [(3, TypeError), ("", ValueError),
                                             ("a\nb", ValueError), ("x" * 201, ValueError)])
def test_a_bad_name_is_refused(q: sqlq.Queue, name: object, error: type[Exception]) -> None:
    q.put(b"x")
    job = _reserve(q)
    calls = []
    with pytest.raises(error, match="name"):
        job.step(name, lambda: calls.append(1))  # type: ignore[arg-type]
    with pytest.raises(error, match="name"):
        job.save_cursor(name, 1)  # type: ignore[arg-type]
    assert calls == []


@pytest.mark.face
def test_a_step_on_something_that_is_no_connection_is_refused_unrun(q: sqlq.Queue) -> None:
    q.put(b"x")
    job = _reserve(q)
    calls = []
    with pytest.raises(TypeError, match="conn must be a sqlq.Transaction.* not int"):
        job.step("s", lambda: calls.append(1), conn=42)
    with pytest.raises(TypeError, match="plain function"):
        job.step("s", asyncio.sleep, 0, conn=42)
    assert calls == [] and job.steps == []


@pytest.mark.face
def test_a_peeked_job_has_no_lease_to_record_under(q: sqlq.Queue) -> None:
    jid = q.put(b"x")
    job = q.peek(jid)
    assert job is not None
    with pytest.raises(ValueError, match="not reserved"):
        job.step("s", lambda: 1)
    with pytest.raises(ValueError, match="not reserved"):
        job.snooze(1)
    assert job.steps == [] and job.cursor("c", 4) == 4


def _app_connection(backend: str, db_url: str) -> tuple[sqlq.Queue, Any]:
    """A Queue and the application's own autocommit connection to its database (the
    Queue through Python's sqlite3 on a file: two SQLite libraries in one process may
    not share one)."""
    if is_postgres(backend):
        import psycopg

        return sqlq.Queue(db_url), psycopg.connect(db_url, autocommit=True)
    return sqlq.Queue(db_url, driver="sqlite3"), sqlite3.connect(db_url, isolation_level=None)


@pytest.mark.pg_fresh  # it makes a table
def test_a_step_on_the_applications_own_connection_commits_with_its_write(
        backend: str, db_url: str) -> None:
    queue, conn = _app_connection(backend, db_url)
    with queue, conn:
        conn.execute("CREATE TABLE ledger (n INTEGER)")
        jid = queue.put(b"x")
        job = _reserve(queue)
        with pytest.raises(ZeroDivisionError):
            job.step("write", lambda: conn.execute("INSERT INTO ledger VALUES (1)") and 1 / 0,
                     conn=conn)
        assert conn.execute("SELECT count(*) FROM ledger").fetchone()[0] == 0
        assert _names(queue, jid) == []

        def write() -> str:
            conn.execute("INSERT INTO ledger VALUES (1)")
            return "written"

        assert job.step("write", write, conn=conn) == "written"
        assert job.step("write", write, conn=conn) == "written"  # recorded: not run again
        assert conn.execute("SELECT count(*) FROM ledger").fetchone()[0] == 1
        assert _names(queue, jid) == ["write"]
        job.release()
        assert _reserve(queue).step("write", write) == "written"
        assert conn.execute("SELECT count(*) FROM ledger").fetchone()[0] == 1


def test_sqlq_copy_moves_steps_and_cursors(db_url: str, tmp_path: Path) -> None:
    with sqlq.Queue(db_url) as source:
        jid = source.put(b"x")
        job = _reserve(source)
        job.step("one", lambda: {"a": 1})
        job.save_cursor("row", 41)
        job.release()
        other = source.put(b"y")
    target = str(tmp_path / "copy.db")
    report = copy(db_url, target)
    assert report.counts["step"] == 2
    with sqlq.Queue(target) as copied:
        job = _reserve(copied)
        assert job.id == jid and job.step("one", lambda: "not run") == {"a": 1}
        assert job.cursor("row") == 41
        job.delete()  # its steps go with it (the count came along)
        assert copied.views.steps(jid) == [] and copied.views.steps(other) == []


@pytest.mark.postgres_only
@pytest.mark.pg_fresh  # it makes a table
def test_on_postgresql_no_claim_takes_the_job_while_its_step_commits(db_url: str) -> None:
    """The lease is checked with the job's row locked to the commit: a claim after the
    TTR ran out (while the step's work still runs) skips the job, so nobody else can run
    the step meanwhile; the record commits, then the job is claimable again."""
    import threading

    with sqlq.Queue(db_url) as queue, sqlq.Queue(db_url) as other:
        with queue.transaction() as tx:
            tx.execute("CREATE TABLE ledger (n INTEGER)")
        jid = queue.put(b"x", ttr=1)
        job = _reserve(queue)
        working, claimed = threading.Event(), threading.Event()

        def write(tx: sqlq.Transaction) -> str:
            working.set()
            assert claimed.wait(30)
            tx.execute("INSERT INTO ledger VALUES (1)")
            return "once"

        looks: list[object] = []

        def claim() -> None:
            assert working.wait(30)
            time.sleep(1.2)  # past the job's TTR
            looks.append(other.reserve(timeout=0))
            claimed.set()

        thread = threading.Thread(target=claim)
        thread.start()
        with queue.transaction() as tx:
            assert job.step("write", write, tx, conn=tx) == "once"
        thread.join()
        assert looks == [None]
        again = _reserve(other)  # now its lease has run out, unlocked
        assert again.id == jid and again.step("write", lambda: "twice") == "once"


@pytest.mark.pg_fresh  # it makes a table
def test_a_step_through_sqlalchemy_commits_or_rolls_back_with_its_caller(
        backend: str, db_url: str) -> None:
    """An SQLAlchemy Connection or Session in a transaction of its own: the step joins
    it, and is recorded when the caller commits (nothing when it rolls back)."""
    import sqlalchemy as sa
    from sqlalchemy.orm import Session

    pg = is_postgres(backend)
    queue = sqlq.Queue(db_url) if pg else sqlq.Queue(db_url, driver="sqlite3")
    engine = sa.create_engine(db_url.replace("postgresql://", "postgresql+psycopg://", 1)
                              if pg else f"sqlite:///{db_url}",
                              # SQLAlchemy reads no bytes: UTF8 from a SQL_ASCII database
                              connect_args={"client_encoding": "utf8"} if pg else {})
    insert = sa.text("INSERT INTO ledger VALUES (1)")
    try:
        with queue, engine.connect() as c:
            c.execute(sa.text("CREATE TABLE ledger (n INTEGER)"))
            c.commit()
            jid = queue.put(b"x")
            job = _reserve(queue)
            assert job.step("conn", lambda: c.execute(insert) and "c", conn=c) == "c"
            c.rollback()
            assert _names(queue, jid) == []
            assert job.step("conn", lambda: c.execute(insert) and "c", conn=c) == "c"
            c.commit()
            with Session(engine) as s:
                assert job.step("session", lambda: s.execute(insert) and "s", conn=s) == "s"
                s.commit()
            assert _names(queue, jid) == ["conn", "session"]
            assert c.execute(sa.text("SELECT count(*) FROM ledger")).scalar() == 2
    finally:
        engine.dispose()


def test_sqlq_backup_keeps_steps_and_cursors(db_url: str, tmp_path: Path) -> None:
    with sqlq.Queue(db_url) as source:
        jid = source.put(b"x")
        job = _reserve(source)
        job.step("one", lambda: [1])
        job.save_cursor("row", 7)
        source.backup(str(tmp_path / "backup.db"))
    with sqlq.Queue(str(tmp_path / "backup.db")) as copied:
        info = copied.stats_job(jid)
        assert [s["name"] for s in info["steps"]] == ["one"]
        assert [(c["name"], c["value"]) for c in info["cursors"]] == [("row", 7)]


def test_an_asyncjob_awaits_an_async_step_once(db_url: str) -> None:
    calls: list[str] = []

    async def fetch(url: str) -> dict[str, str]:
        await asyncio.sleep(0)
        calls.append(url)
        return {"got": url}

    async def main() -> None:
        async with sqlq.AsyncQueue(db_url) as aq:
            jid = await aq.put(b"x")
            job = await aq.reserve(timeout=0)
            assert job is not None and job.id == jid
            assert await job.step("fetch", fetch, "a") == {"got": "a"}
            assert await job.step("fetch", fetch, "b") == {"got": "a"}
            await job.save_cursor("at", 3)
            assert await job.cursor("at") == 3
            assert [s["name"] for s in job.steps] == ["fetch"]
            await job.snooze(0)
            again = await aq.reserve(timeout=0)
            assert again is not None and again.reserves == 1
            assert await again.step("fetch", fetch, "c") == {"got": "a"}

    asyncio.run(main())
    assert calls == ["a"]
