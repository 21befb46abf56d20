"""PostgreSQL behind a real PgBouncer (issue 37): sqlq finds a transaction pool by itself
and works through it, with the promises the docs give (docs/postgres.md "Poolers").

* detection: a transaction pool, a session pool and a direct connection are told apart
  at open, with one line saying what was found (before: a transaction pool was refused);
* no job goes to a second worker while its holder lives, for longer than the grace a
  dead holder gets (the holder keeps no session lock: its heartbeats alone);
* a SIGKILLed holder's job comes back at once on its own machine, within the grace
  from another (a pid namespace of its own);
* limits and dependencies are exact through the pool;
* a blocked reserve wakes within the poll through the pool, at once with listen_url;
* the migrations and ``sqlq copy`` / ``backup`` run through the pool.
"""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlsplit

import pytest

import sqlq
from sqlq.backends.postgres import pooling
from sqlq.backends.postgres.owners import GRACE_S
from tests import forkserver
from tests.conftest import ROOT, spawn
from tests.integration.test_pg_liveness import HOLDER, _finish, _line, _no_thief, _time_to_take_back
from tests.pgserver import PgServer
from tests.timing import SLACK


def _through(pgbouncer: Any, mode: str, pg_url: str) -> str:
    return str(pgbouncer(mode).through(pg_url))


@pytest.mark.parametrize("mode", ["transaction", "session", "direct"])
def test_what_stands_before_the_server_is_found_and_said_in_one_line(
        pgbouncer: Any, pg_url: str, mode: str, caplog: pytest.LogCaptureFixture) -> None:
    url = pg_url if mode == "direct" else _through(pgbouncer, mode, pg_url)
    caplog.set_level(logging.INFO, logger="sqlq")
    started = time.monotonic()
    with sqlq.Queue(url) as q:  # before: a transaction pool was refused here
        took = time.monotonic() - started
        assert q.backend.db.mode == mode  # type: ignore[attr-defined]
        q.put(b"x", tube="t")
        job = q.reserve("t", timeout=0)
        assert job is not None
        job.delete()
    said = [r.getMessage() for r in caplog.records if "pool (" in r.getMessage()
            or "session pool" in r.getMessage()]
    if mode == "direct":
        assert not said
    else:
        assert len(said) == 1 and "\n" not in said[0] and f"{mode} pool" in said[0]
    if mode == "transaction":
        assert "listen_url" in said[0] and f"{pooling.POLL_S:.1f} s" in said[0]
    print(f"\nopened {mode} in {took * 1000:.1f} ms")


def test_a_transaction_pool_is_found_while_other_clients_keep_it_busy(
        pgbouncer: Any, pg_url: str) -> None:
    """Six clients run transactions meanwhile: every detection still says transaction."""
    url = _through(pgbouncer, "transaction", pg_url)
    stop = threading.Event()

    def busy() -> None:
        with sqlq.Queue(url, durability="normal") as q:
            while not stop.is_set():
                q.put(b"noise", tube="noise")

    threads = [threading.Thread(target=busy) for _ in range(6)]
    for t in threads:
        t.start()
    try:
        found = []
        for _ in range(50):
            pooling._modes.clear()
            with sqlq.Queue(url) as q:
                q.stats()
                found.append(q.backend.db.mode)  # type: ignore[attr-defined]
    finally:
        stop.set()
        for t in threads:
            t.join()
    assert found == ["transaction"] * 50


def test_pooler_forces_the_mode(pg_url: str, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="sqlq")
    with sqlq.Queue(pg_url + "?pooler=transaction") as q:
        assert q.backend.db.mode == "transaction"  # type: ignore[attr-defined]
        q.put(b"x", tube="t")
        job = q.reserve("t", timeout=0)
        assert job is not None and job.body == b"x"
        job.delete()
    assert any("transaction pool" in r.getMessage() for r in caplog.records)


@pytest.mark.slow
@pytest.mark.parametrize(("holder_way", "thief_way"), [
    ("transaction", "transaction"), ("direct", "transaction"), ("transaction", "direct")])
def test_a_live_holder_keeps_its_job_through_a_transaction_pool(
        pgbouncer: Any, pg_server: PgServer, pg_url: str, holder_way: str, thief_way: str
        ) -> None:
    """A holder through the pool leaves no session lock on its shared server sessions (one
    would outlive it there, or be found free by a reaper on the same session): its
    heartbeats keep it alive for a second worker reserving for longer than the grace a
    dead holder gets; then its delete goes through. Processes connected directly and
    through the pool share a database: each side's rule holds for the other's."""
    pooled = _through(pgbouncer, "transaction", pg_url)
    url = pooled if holder_way == "transaction" else pg_url
    with sqlq.Queue(url) as q:
        job_id = q.put(b"long", tube="t", ttr=300)
    proc = spawn(HOLDER, url, stdin=subprocess.PIPE)
    try:
        assert int(_line(proc)) == job_id
        locks = pg_server.psql(
            "SELECT count(*) FROM pg_locks l JOIN pg_database d ON d.oid = l.database"
            f" WHERE l.locktype = 'advisory' AND d.datname = '{urlsplit(pg_url).path[1:]}'")
        if holder_way == "transaction":
            assert locks.strip() == "0", "a session advisory lock left on a pooled session"
        _no_thief(pooled if thief_way == "transaction" else pg_url, GRACE_S + 2)
        assert _finish(proc) == "deleted"
    finally:
        proc.kill()
        proc.wait()


def test_a_sigkilled_holder_through_a_transaction_pool_gives_its_job_back_at_once(
        pgbouncer: Any, pg_url: str) -> None:
    took = _time_to_take_back(_through(pgbouncer, "transaction", pg_url), [])
    print(f"\nrecovery of a SIGKILLed holder on this machine, transaction pool: "
          f"{took * 1000:.0f} ms")
    assert took < 1 + SLACK  # the liveness poll of a waiter (0.5 s)


@pytest.mark.slow
def test_a_sigkilled_holder_elsewhere_through_a_transaction_pool_after_the_grace(
        pgbouncer: Any, pg_url: str) -> None:
    assert shutil.which("unshare"), "util-linux's unshare is needed (Debian: util-linux)"
    argv = ["unshare", "--pid", "--fork", "--kill-child"] if os.geteuid() == 0 else \
        ["unshare", "--user", "--map-root-user", "--pid", "--fork", "--kill-child"]
    took = _time_to_take_back(_through(pgbouncer, "transaction", pg_url), argv)
    print(f"\nrecovery of a SIGKILLed holder elsewhere, transaction pool: {took * 1000:.0f} ms")
    assert GRACE_S - 1.5 < took < GRACE_S + 1 + SLACK


#: A worker in another process: says it is about to block, then when it got a job.
WAITER = """
import sys, time, sqlq
q = sqlq.Queue(sys.argv[1])
q.stats()
print("ready", flush=True)
job = q.reserve("w", timeout=30)
got = time.time()
if job is not None:
    job.delete()
print("none" if job is None else got, flush=True)
"""


def _wake_after_put(url: str, blocked_for: float) -> float:
    """Seconds from a put to a reserve blocked on url in another process getting it."""
    proc = spawn(WAITER, url)
    try:
        assert _line(proc) == "ready"
        time.sleep(blocked_for)  # blocked by now; the put at another phase of the poll
        with sqlq.Queue(url) as putter:
            putter.put(b"w", tube="w")
            put_at = time.time()
        return float(_line(proc)) - put_at
    finally:
        proc.kill()
        proc.wait()


@pytest.mark.slow
def test_a_blocked_reserve_wakes_within_the_poll_through_a_transaction_pool(
        pgbouncer: Any, pg_url: str) -> None:
    url = _through(pgbouncer, "transaction", pg_url)
    took = [_wake_after_put(url, 0.5 + i * 0.15) for i in range(4)]
    print(f"\nwake-ups through a transaction pool, polling: {[round(t * 1000) for t in took]} ms")
    assert max(took) < pooling.POLL_S + SLACK


@pytest.mark.slow
def test_a_blocked_reserve_wakes_at_once_with_listen_url(pgbouncer: Any, pg_url: str) -> None:
    url = _through(pgbouncer, "transaction", pg_url) + "?listen_url=" + quote(pg_url, safe="")
    took = [_wake_after_put(url, 0.5 + i * 0.15) for i in range(5)]
    print(f"\nwake-ups through a transaction pool, listen_url: "
          f"{[round(t * 1000) for t in took]} ms")
    assert sorted(took)[2] < 0.1 * SLACK  # the median: a notification, not the poll


def test_a_listen_url_through_a_transaction_pool_is_refused(pgbouncer: Any, pg_url: str
                                                            ) -> None:
    pooled = _through(pgbouncer, "transaction", pg_url)
    with sqlq.Queue(pooled + "?listen_url=" + quote(pooled, safe="")) as q, \
            pytest.raises(sqlq.DatabaseError) as info:
        q.reserve("t", timeout=0.1)
    assert "\n" not in str(info.value) and "LISTEN hears nothing" in str(info.value)


def test_limits_and_dependencies_are_exact_through_a_transaction_pool(
        pgbouncer: Any, pg_url: str) -> None:
    """Four threads, each with its own Queue, drain a tube capped at two reservations
    and a chain of dependent jobs: never more than two held at once, never a child
    before its parent is done."""
    url = _through(pgbouncer, "transaction", pg_url)
    with sqlq.Queue(url) as q:
        q.limit("capped", concurrency=2)
        for i in range(40):
            q.put(b"%d" % i, tube="capped")
        chain = [q.put(b"0", tube="chain")]
        for i in range(1, 10):
            chain.append(q.put(b"%d" % i, tube="chain", after=[chain[-1]]))
    held, most, order, lock = [0], [0], [], threading.Lock()
    # All four sessions open before the first reserve, and the first capped job is held
    # until a second one is (or 10 s pass): the cap is reached however busy the machine
    # (one thread once drained the tube alone while the others were still connecting).
    ready, two_held = threading.Barrier(4), threading.Event()

    def work() -> None:
        with sqlq.Queue(url) as w:  # connected through the pool
            ready.wait(60)
            while True:
                job = w.reserve(["capped", "chain"], timeout=1)
                if job is None:
                    return
                with lock:
                    if job.tube == "capped":
                        held[0] += 1
                        most[0] = max(most[0], held[0])
                        if held[0] == 2:
                            two_held.set()
                    else:
                        order.append(job.id)
                if job.tube == "capped":
                    two_held.wait(10)
                time.sleep(0.005)
                with lock:
                    if job.tube == "capped":
                        held[0] -= 1
                job.delete()

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert most[0] == 2 and order == chain


def _sqlq(*args: str) -> subprocess.CompletedProcess[str]:
    return forkserver.run([sys.executable, "-m", "sqlq", *args], capture_output=True,
                          text=True, timeout=120, env=dict(os.environ, PYTHONPATH=str(ROOT)))


@pytest.mark.slow
def test_migrations_copy_and_backup_run_through_a_transaction_pool(
        pgbouncer: Any, pg_server: PgServer, tmp_path: Path) -> None:
    name, direct = pg_server.clone("template0")  # empty: migrated through the pool
    try:
        url = _through(pgbouncer, "transaction", direct)
        source = tmp_path / "src.db"
        with sqlq.Queue(str(source)) as q:
            q.put(b"from sqlite", tube="t", priority=5)
            q.put(b"later", tube="t", delay=3600)
        out = _sqlq("copy", str(source), url)
        assert out.returncode == 0, out.stderr
        with sqlq.Queue(url) as q:
            assert q.stats()["current-jobs-delayed"] == 1
            job = q.reserve("t", timeout=0)
            assert job is not None and job.body == b"from sqlite" and job.priority == 5
            job.release()
        back = tmp_path / "back.db"
        out = _sqlq("--db", url, "backup", str(back))
        assert out.returncode == 0, out.stderr
        with sqlq.Queue(str(back)) as q:
            job = q.reserve("t", timeout=0)
            assert job is not None and job.body == b"from sqlite"
    finally:
        pg_server.drop_database(name)


def test_lock_wait_holds_through_a_transaction_pool(pgbouncer: Any, pg_url: str) -> None:
    """lock_wait is a session setting directly; through the pool each write sets it for its
    own transaction: a put blocked by a table lock raises Locked after it, not never."""
    import psycopg

    with sqlq.Queue(_through(pgbouncer, "transaction", pg_url)) as q, \
            psycopg.connect(pg_url, autocommit=True) as blocker:
        q.put(b"before", tube="t")
        q.lock_wait = 0.3
        blocker.execute("BEGIN; LOCK TABLE sqlq_jobs IN EXCLUSIVE MODE")
        started = time.monotonic()
        with pytest.raises(sqlq.Locked):
            q.put(b"blocked", tube="t")
        took = time.monotonic() - started
        blocker.execute("ROLLBACK")
        assert 0.25 < took < 0.3 + SLACK
        q.put(b"after", tube="t")


def test_a_server_session_ended_under_a_statement_is_a_lost_connection(
        pgbouncer: Any, pg_server: PgServer, pg_url: str) -> None:
    """A server session ended under a client's statement (``pg_terminate_backend``; PgBouncer
    answers "server conn crashed?" and closes the client): the read runs once more, as
    on a lost direct connection (the error's code: unit/test_pg_login_errors.py)."""
    with sqlq.Queue(_through(pgbouncer, "transaction", pg_url)) as q:
        done: list[Any] = []
        reader = threading.Thread(target=lambda: done.append(q.backend.read(
            lambda c: c.execute("SELECT 'slept', pg_sleep(1.5)").fetchone()[0])))
        reader.start()
        database = urlsplit(pg_url).path[1:]
        deadline = time.monotonic() + 10
        pids: list[str] = []
        while not pids and time.monotonic() < deadline:
            pids = pg_server.psql(
                "SELECT pid FROM pg_stat_activity WHERE query LIKE 'SELECT ''slept''%'"
                f" AND datname = '{database}' AND state = 'active'").split()
        assert pids and pg_server.terminate(int(pids[0]))
        reader.join(30)
        assert done == ["slept"]


def test_a_statement_pool_is_refused_at_once_in_one_line(pgbouncer: Any, pg_url: str) -> None:
    started = time.monotonic()
    with pytest.raises(sqlq.DatabaseError) as info:
        sqlq.Queue(_through(pgbouncer, "statement", pg_url)).put(b"x", tube="t")
    assert not isinstance(info.value, sqlq.Disconnected)
    assert "\n" not in str(info.value) and "statement mode refuses" in str(info.value)
    assert time.monotonic() - started < 2 * SLACK  # not waited for as a server away
