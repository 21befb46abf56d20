"""On PostgreSQL a Queue needs its server only once used, and a connection the server
dropped is made again without a word.

* F13 (reliability.md): ``sqlq work --import`` of a module that makes its Queue at import,
  started while the server is down, waits for it as a command worker does;
* W5: the first call after a restart dropped the idle connection goes through (a read,
  and a write exactly once), as do transactions;
* W8: in PgBouncer's session mode sqlq works through it (transaction mode:
  test_pg_pooler.py);
* W4: an async worker (``--concurrency``, ``--prefetch``) stays up through immediate
  restarts and runs no finished job twice.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

import sqlq
from sqlq.backends.postgres import db as pg_db
from sqlq.tasks.task import encode_call
from tests.pgserver import PgServer
from tests.timing import SLACK
from tests.workers import Work, lines, wait_for


def _runs(out: Path) -> Counter[int]:
    return Counter(int(line.split()[0]) for line in lines(out))


@pytest.mark.slow
def test_a_task_worker_started_while_the_server_is_down_waits_for_it(
        pg_server: PgServer, pg_url: str, tmp_path: Path) -> None:
    out = tmp_path / "ran.txt"
    pg_server.stop()
    try:
        worker = Work(pg_url, "--import", "tests.connect_jobs", "--tube", "connect",
                      env={"SQLQ_TEST_OUT": str(out)})
        # Before: "cannot import tests.connect_jobs: Disconnected: ..." and exit 1 at once.
        worker.wait_log("waiting for the database server")
        time.sleep(1)  # it goes on waiting (the supervisor would restart a crashed child)
        assert worker.proc.poll() is None, worker.text()
        assert "cannot import" not in worker.text()
    finally:
        pg_server.start()
    try:
        with sqlq.Queue(pg_url) as q:
            jid = q.put(encode_call("tests.connect_jobs.note", ["hello"], {}), tube="connect")
        wait_for(lambda: lines(out), what=f"the job run; worker log:\n{worker.text()}")
        assert lines(out) == [f"{jid} hello"]
    finally:
        assert worker.stop() == 0, worker.text()


def test_a_queue_is_made_without_its_server_and_connects_on_first_use(
        pg_server: PgServer, pg_url: str) -> None:
    pg_server.stop()
    try:
        q = sqlq.Queue(pg_url)  # before: Disconnected at once
    finally:
        pg_server.start()
    with q:
        jid = q.put(b"x", tube="t")  # connects, migrates, puts
        assert q.peek(jid) is not None


def test_a_refusing_server_is_said_at_once(pg_server: PgServer) -> None:
    """Only an unreachable or starting server is waited for: a missing database is not."""
    started = time.monotonic()
    with pytest.raises(sqlq.DatabaseError) as info:
        sqlq.Queue(pg_server.url_for("no_such_database"))
    assert not isinstance(info.value, sqlq.Disconnected)
    assert "no_such_database" in str(info.value) and "\n" not in str(info.value)
    assert time.monotonic() - started < 1 + SLACK


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["fast", "immediate"])
def test_the_first_calls_after_a_restart_go_through(pg_server: PgServer, pg_url: str,
                                                    mode: str) -> None:
    """W5: nothing in flight, the idle connection dropped by a restart: a read, a write
    (exactly once) and a transaction go through without Disconnected."""
    with sqlq.Queue(pg_url) as q:
        q.put(b"before", tube="t")
        pg_server.restart(mode)
        assert q.stats()["current-jobs-ready"] == 1  # before: Disconnected
        pg_server.restart(mode)
        q.put(b"after", tube="t")  # before: Disconnected ("may have committed")
        assert q.stats_tube("t")["current-jobs-ready"] == 2  # once, not twice
        pg_server.restart(mode)
        with q.transaction() as tx:
            tx.put(b"in a transaction", tube="t")
        pg_server.restart(mode)
        job = q.reserve("t", timeout=0)
        assert job is not None and job.body == b"before"
        pg_server.restart(mode)
        job.delete()
        pg_server.restart(mode)
        assert sorted(j.body for j in q.reserve_many(10, "t", timeout=0)) == \
            [b"after", b"in a transaction"]


def test_a_new_session_answering_for_another_statement_is_dropped_as_lost(
        pg_url: str) -> None:
    """A set-up read answered without rows (a pooler out of step: PgBouncer once answered a
    new client's SELECT with the DISCARD ALL it resets sessions with) makes the connection
    a lost one, which the caller makes again, not an error that ends the process; the
    same answer elsewhere stays an error (a statement of sqlq's that reads no rows is a
    bug to see). DISCARD ALL is what the real server answers with here."""
    conn = pg_db.connect(pg_url, "db")
    with pytest.raises(sqlq.Disconnected, match="answered another statement.*DISCARD ALL"):
        with pg_db.closed_on_error(conn, "db", rows_answered=True):
            conn.execute("DISCARD ALL").fetchone()
    assert conn.closed
    conn = pg_db.connect(pg_url, "db")
    with pytest.raises(sqlq.DatabaseError) as raised:
        with pg_db.closed_on_error(conn, "db"):
            conn.execute("DISCARD ALL").fetchone()
    assert not isinstance(raised.value, sqlq.Disconnected)
    assert conn.closed


def test_a_session_pool_works(pgbouncer: Any, pg_url: str) -> None:
    url = pgbouncer("session").through(pg_url)
    with sqlq.Queue(url) as q, sqlq.Queue(url) as other:
        jid = q.put(b"x", tube="t")
        job = other.reserve("t", timeout=5)
        assert job is not None and job.id == jid
        job.delete()
        assert q.stats()["current-jobs-ready"] == 0


@pytest.mark.slow
def test_an_async_worker_stays_up_through_immediate_restarts(
        pg_server: PgServer, pg_url: str, tmp_path: Path) -> None:
    """W4: ``--concurrency 4 --prefetch 4`` while a producer puts jobs, so that the
    worker both claims with acknowledgements and waits; five immediate restarts: it
    never exits, every job put runs, and none runs twice (in full durability a restart
    undoes no commit, and a worker that stays up acknowledges its finished jobs again)."""
    out = tmp_path / "ran.txt"
    worker = Work(pg_url, "--import", "tests.connect_jobs", "--tube", "connect-async",
                  "--concurrency", "4", "--prefetch", "4", env={"SQLQ_TEST_OUT": str(out)})
    put: list[int] = []
    stop = threading.Event()

    def produce() -> None:  # 3 jobs every 10 ms, through the restarts
        body = encode_call("tests.connect_jobs.anote", ["x"], {})
        with sqlq.Queue(pg_url) as q:
            while not stop.is_set():
                with contextlib.suppress(sqlq.Disconnected):  # may have committed: not counted
                    put.extend(q.put_many([body] * 3, tube="connect-async"))
                time.sleep(0.01)

    producer = threading.Thread(target=produce)
    producer.start()
    try:
        for _ in range(5):
            seen = len(lines(out))

            def ran_more(seen: int = seen) -> bool:
                return len(lines(out)) > seen + 20 or worker.proc.poll() is not None

            wait_for(ran_more, what=f"runs; log:\n{worker.text()}")
            pg_server.restart("immediate")
            assert worker.proc.poll() is None, worker.text()
        stop.set()
        producer.join()
        wait_for(lambda: set(_runs(out)) >= set(put) or worker.proc.poll() is not None,
                 what=f"every job run; worker log:\n{worker.text()}")
        assert worker.proc.poll() is None, worker.text()
        twice = {jid: count for jid, count in _runs(out).items() if count > 1}
        assert not twice, f"ran more than once: {twice}\n{worker.text()}"
    finally:
        stop.set()
        producer.join()
        assert worker.stop() == 0, worker.text()


@pytest.mark.slow
def test_a_holders_touch_or_release_waits_for_the_server_no_longer_than_its_lease(
        pg_server: PgServer, pg_url: str) -> None:
    """A touch or a release while the server is away gives up when its lease ends
    (Disconnected), as a worker's heartbeat needs (the loop that makes it also watches
    stop requests, cancels and timeouts), and a worker giving its jobs back as it stops.
    Before, each waited RECONNECT_FOR_S (60 s), and then, an acknowledgement, once more:
    two minutes past a 2 s lease. A touch whose lease has not ended waits on."""
    with sqlq.Queue(pg_url) as q:
        for verb in ("touch", "release"):  # the heartbeat's, and a stopping worker's
            q.put(b"x", ttr=2, tube=verb)
            job = q.reserve(verb, timeout=0)
            assert job is not None
            pg_server.stop("immediate")
            try:
                began = time.monotonic()
                with pytest.raises(sqlq.Disconnected):
                    getattr(job, verb)()
                took = time.monotonic() - began
            finally:
                pg_server.start()
            assert took < 2 + 5 * SLACK, (verb, took)
        q.put(b"y", ttr=60, tube="long")
        held = q.reserve("long", timeout=0)
        assert held is not None and held.body == b"y"
        pg_server.stop("immediate")
        threading.Timer(2.0, pg_server.start).start()
        began = time.monotonic()
        held.touch()  # the server is back before its lease ends: the touch goes through
        assert time.monotonic() - began >= 1.5


def test_an_async_wait_goes_on_when_the_server_goes_between_its_look_and_due_time(
        pg_server: PgServer, pg_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """W4's path: an AsyncQueue waiter's look went through, then the server went away as
    it read its due time, and stayed away longer than a call waits for it (shortened
    here). That read is waited through as the look's own (it raised Disconnected into
    the async worker's reserve, which exited and left its finished jobs to run again)."""
    monkeypatch.setattr(pg_db, "RECONNECT_FOR_S", 0.2)

    async def main() -> bool:
        async with sqlq.AsyncQueue(pg_url) as aq:
            engine = aq.queue.engine
            real_due = engine.due
            went: list[float] = []

            def due(tubes: Any, since: int | None = None) -> int | None:
                if not went:
                    pg_server.stop("immediate")
                    went.append(time.monotonic())
                return real_due(tubes, since)

            engine.due = due  # type: ignore[method-assign]
            waiter = asyncio.ensure_future(aq.reserve("t", timeout=None))
            while not went:
                await asyncio.sleep(0.02)
            await asyncio.sleep(1.0)
            assert not waiter.done() or waiter.result()  # before: Disconnected
            await asyncio.to_thread(pg_server.start)
            with sqlq.Queue(pg_url) as producer:
                jid = producer.put(b"after", tube="t")
            job = await asyncio.wait_for(waiter, 60)
            assert job is not None
            await job.delete()
            return job.id == jid

    try:
        assert asyncio.run(main())
    finally:
        pg_server.start()


def test_only_a_write_cut_off_at_its_commit_raises(pg_server: PgServer, pg_url: str) -> None:
    """The rule in db.py, both ways, with the session really terminated: a transaction
    whose connection is lost before its COMMIT runs once more on a new one; one lost at
    its COMMIT may have committed, and raises Disconnected without running again."""
    calls: list[str] = []

    def pid_of(conn: Any) -> int:
        return int(conn.execute("SELECT pg_backend_pid()").fetchone()[0])

    with sqlq.Queue(pg_url) as q:
        def lost_before_commit(conn: Any) -> str:
            calls.append("run")
            if len(calls) == 1:
                pg_server.terminate(pid_of(conn))
                conn.execute("SELECT 1")  # the connection is gone: nothing committed
            return "done"

        assert q.backend.write(lost_before_commit) == "done"
        assert calls == ["run", "run"]

        calls.clear()

        def lost_at_commit(conn: Any) -> None:
            calls.append("run")
            conn.execute("SELECT 1")
            pg_server.terminate(pid_of(conn))  # the COMMIT that follows meets it

        with pytest.raises(sqlq.Disconnected):
            q.backend.write(lost_at_commit)
        assert calls == ["run"]
        assert q.stats()["current-jobs-ready"] == 0  # and the next call goes through
