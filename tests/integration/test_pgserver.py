"""The throwaway PostgreSQL server the PostgreSQL suites stand on (tests/pgserver.py).

If these fail, every PostgreSQL test would be testing the harness instead of sqlq.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import psycopg
import pytest
from psycopg import sql

import sqlq
from tests.conftest import ROOT
from tests.pgserver import PgServer, PgUnavailable


@pytest.mark.pg_fresh  # a clone each; test_a_reset_database_is_as_fresh_as_a_clone: the reset
@pytest.mark.parametrize("turn", [1, 2])
def test_each_test_gets_a_fresh_database(pg_url: str, turn: int) -> None:
    # Whichever turn runs second would see the first one's table in a shared database.
    with psycopg.connect(pg_url, autocommit=True) as conn:
        found = conn.execute("SELECT to_regclass('public.marker')").fetchone()
        assert found == (None,)
        conn.execute("CREATE TABLE marker (turn int)")
        conn.execute("INSERT INTO marker VALUES (%s)", (turn,))


def _state(url: str) -> dict[str, object]:
    """What a test could see of a database besides its definitions."""
    with psycopg.connect(url, autocommit=True) as conn:
        tables = [r[0] for r in conn.execute(
            "SELECT relname FROM pg_class WHERE relkind = 'r' AND relname LIKE 'sqlq%%'"
            " ORDER BY 1")]
        state: dict[str, object] = {t: conn.execute(
            sql.SQL("SELECT count(*), coalesce(max(t::text), '') FROM {} AS t").format(
                sql.Identifier(t))).fetchone() for t in tables}
        state["pages"] = conn.execute(
            "SELECT sum(pg_relation_size(oid)) FROM pg_class WHERE relname = 'sqlq_jobs'"
        ).fetchone()
        state["statistics"] = conn.execute("SELECT count(*) FROM pg_statistic s JOIN pg_class c"
                                           " ON c.oid = s.starelid AND c.relname LIKE 'sqlq%%'"
                                           ).fetchone()
        state["counters"] = conn.execute("SELECT sum(n_tup_ins + n_live_tup + n_dead_tup)"
                                         " FROM pg_stat_user_tables").fetchone()
    with sqlq.Queue(url) as q:
        state["first id"] = q.put(b"x")
    return state


def _fresh_state(pg_server: PgServer, template: str) -> dict[str, object]:
    """What a clone of the template shows (:func:`_state`), on a clone made for it."""
    name, clone = pg_server.clone(template)
    try:
        return _state(clone)
    finally:
        pg_server.drop_database(name)


def test_a_reset_database_is_as_fresh_as_a_clone(pg_server: PgServer, pg_template: str) -> None:
    """What pg_url hands out (tests/pgdb.py): after a test wrote rows, learnt statistics,
    left sessions open and holding locks, the reset database shows what a clone shows,
    under a new name the sessions it cut cannot reconnect to; a test that changed a
    definition gets a new clone."""
    from tests.pgdb import SharedDatabase

    fresh = _fresh_state(pg_server, pg_template)
    shared = SharedDatabase(pg_server, pg_template, "check")
    try:
        used = shared.url
        left_open = sqlq.Queue(used)
        for i in range(300):
            left_open.put(b"x", tube=f"t{i % 3}", unique_key=str(i))
        assert left_open.reserve("t0", timeout=0) is not None  # an owner's advisory lock
        left_open.subscribe("news", "t1")
        left_open.limit("t2", concurrency=1)
        with psycopg.connect(used, autocommit=True) as conn:
            conn.execute("ANALYZE sqlq_jobs")  # statistics TRUNCATE would keep
            conn.execute("SELECT setval('sqlq_jobs_id_seq', 1000)")
        holder = psycopg.connect(used)
        holder.execute("SELECT count(*) FROM sqlq_jobs")  # an open transaction
        assert shared.reset() is None
        assert shared.url != used
        assert _state(shared.url) == fresh
        with pytest.raises(psycopg.OperationalError):
            psycopg.connect(used)  # the old name is gone
        with pytest.raises(psycopg.OperationalError):
            holder.execute("SELECT 1")  # cut
        assert shared.compared_whole == 0  # told by the counters alone (PostgreSQL 15+)
        with psycopg.connect(shared.url) as conn:
            sqlq.put(conn, b"rolled back")  # rows only the pages and the counters show
            conn.rollback()
        assert shared.reset() is None
        assert _state(shared.url) == fresh
        with psycopg.connect(shared.url, autocommit=True) as conn:
            conn.execute("CREATE TEMP TABLE scratch (x int)")  # catalogs written, and undone
            sqlq.put(conn, b"kept")
        assert shared.reset() is None
        assert shared.compared_whole == 1
        assert _state(shared.url) == fresh
        for change in ("CREATE TABLE orders (id int)",
                       "ALTER TABLE sqlq_jobs ADD COLUMN extra int",
                       "ALTER DATABASE {name} SET work_mem = '8MB'"):
            with psycopg.connect(shared.url, autocommit=True) as conn:
                conn.execute(change.format(name=shared.name).encode())
            why = shared.reset()
            assert why is not None and "differ from the template" in why, change
            assert _state(shared.url) == fresh, change
        assert shared.reset() is None
    finally:
        with contextlib.suppress(Exception):
            left_open.close()
        shared.close()


@pytest.mark.parametrize("fault", ["immediate restart", "crashed backend"])
def test_a_reset_after_the_counters_were_discarded_compares_the_tables_whole(
        pg_server: PgServer, pg_template: str, fault: str) -> None:
    """An immediate shutdown or a crash (a backend's: the server recovers without a new
    start time) discards the activity counters but not the rows committed before it: the
    next reset compares every table with the template's instead of trusting them.
    (Trusted, they once left rows written before one of the suite's immediate restarts to
    the next test, whose sqlq copy found the database not empty.)"""
    from tests.pgdb import SharedDatabase

    fresh = _fresh_state(pg_server, pg_template)
    shared = SharedDatabase(pg_server, pg_template, "fault")
    try:
        with sqlq.Queue(shared.url) as q:
            q.limit("t", concurrency=1)  # a row of sqlq_tubes, written once
            q.put(b"x")
        pg_server.psql("CHECKPOINT")  # on disk: the fault keeps them
        if fault == "immediate restart":
            pg_server.restart("immediate")
        else:
            logged = len(pg_server.log_path.read_bytes())
            with psycopg.connect(shared.url) as victim:
                os.kill(victim.info.backend_pid, signal.SIGKILL)
            deadline = time.monotonic() + 60
            while not re.search(rb"reinitializing.*ready to accept connections",  # recovered
                                pg_server.log_path.read_bytes()[logged:], re.DOTALL):
                assert time.monotonic() < deadline, "the server did not recover"
                time.sleep(0.05)
        assert shared.name is not None
        assert pg_server.psql("SELECT count(*) FROM sqlq_tubes", shared.name) == "1"
        assert shared.reset() is None
        assert shared.compared_whole == 1
        assert _state(shared.url) == fresh
        assert shared.reset() is None  # counters cleared since: trusted again
        assert shared.compared_whole == 1
    finally:
        shared.close()


def test_databases_are_copied_from_a_filled_template(pg_server: PgServer) -> None:
    def setup(url: str) -> None:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("CREATE TABLE migrated (v int)")
            conn.execute("INSERT INTO migrated VALUES (7)")
        # a session left open by the set-up must not block the copies
        psycopg.connect(url)

    template = pg_server.make_template("tmpl_filled", setup)
    name, url = pg_server.clone(template)
    try:
        with psycopg.connect(url) as conn:
            assert conn.execute("SELECT v FROM migrated").fetchall() == [(7,)]
    finally:
        pg_server.drop_database(name)


@pytest.mark.pg_fresh  # a table of its own
def test_restart_keeps_committed_data_and_cuts_sessions(pg_server: PgServer,
                                                        pg_url: str) -> None:
    port = pg_server.port
    conn = psycopg.connect(pg_url, autocommit=True)
    conn.execute("CREATE TABLE kept (v text)")
    conn.execute("INSERT INTO kept VALUES ('before restart')")
    pg_server.restart()
    assert pg_server.port == port, "clients reconnect to the same address"
    with pytest.raises(psycopg.OperationalError):
        conn.execute("SELECT 1")
    conn.close()
    with psycopg.connect(pg_url) as again:
        assert again.execute("SELECT v FROM kept").fetchall() == [("before restart",)]


def test_stop_refuses_connections_until_start(pg_server: PgServer, pg_url: str) -> None:
    pg_server.stop()
    try:
        with pytest.raises(psycopg.OperationalError):
            psycopg.connect(pg_url, connect_timeout=2)
    finally:
        pg_server.start()
    with psycopg.connect(pg_url) as conn:
        assert conn.execute("SELECT 1").fetchone() == (1,)


def test_terminate_cuts_one_session(pg_server: PgServer, pg_url: str) -> None:
    victim = psycopg.connect(pg_url, autocommit=True)
    bystander = psycopg.connect(pg_url, autocommit=True)
    pid = victim.info.backend_pid
    assert pg_server.terminate(pid)
    with pytest.raises(psycopg.OperationalError):
        victim.execute("SELECT 1")
    assert bystander.execute("SELECT 1").fetchone() == (1,)
    assert not pg_server.terminate(pid), "the backend is gone"
    victim.close()
    bystander.close()


def _listening(port: int) -> list[str]:
    """Local addresses (hex, as the kernel prints them) of the sockets listening on port."""
    found = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            local, state = line.split()[1], line.split()[3]
            if state == "0A" and int(local.rsplit(":", 1)[1], 16) == port:  # 0A: LISTEN
                found.append(local.rsplit(":", 1)[0])
    return found


def test_listens_on_loopback_only(pg_server: PgServer) -> None:
    assert pg_server.psql("SHOW listen_addresses") == "127.0.0.1"
    assert _listening(pg_server.port) == ["0100007F"]  # 127.0.0.1, and no IPv6 socket


def test_missing_programs_say_what_to_install(tmp_path: Path) -> None:
    with pytest.raises(PgUnavailable, match="apt-get install postgresql"):
        PgServer(bindir=tmp_path).start()


REAPED = """
import sys, time
sys.path.insert(0, sys.argv[1])
from tests.pgserver import PgServer
pg = PgServer().start()
print(pg.postmaster_pid(), pg.root, flush=True)
time.sleep(600)
"""


@pytest.mark.slow
def test_no_server_outlives_a_killed_owner() -> None:
    owner = subprocess.Popen([sys.executable, "-c", REAPED, str(ROOT)], stdout=subprocess.PIPE,
                             text=True)
    assert owner.stdout is not None
    line = owner.stdout.readline().split()
    assert line, "the owner could not start a server"
    postmaster, root = int(line[0]), Path(line[1])
    os.kill(postmaster, 0)  # alive
    owner.send_signal(signal.SIGKILL)  # no atexit, no finalizer: only the reaper is left
    owner.wait()
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            os.kill(postmaster, 0)
        except ProcessLookupError:
            break
        time.sleep(0.1)
    else:
        pytest.fail(f"postgres {postmaster} still runs 30 s after its owner was killed")
    while root.exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not root.exists(), "the server's directory was left behind"


@pytest.mark.slow
def test_without_postgresql_the_tests_fail_and_say_why(tmp_path: Path) -> None:
    # A PostgreSQL suite that skipped when the server is missing would pass on a
    # machine that tests nothing: CI must go red instead.
    env = dict(os.environ, SQLQ_PG_BINDIR=str(tmp_path))
    r = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rfE",
         f"{__file__}::test_listens_on_loopback_only"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode != 0, r.stdout
    assert "need a server and none could be started" in r.stdout
    assert "apt-get install postgresql" in r.stdout
    assert "skipped" not in r.stdout


def test_sessions_find_a_connection_by_its_application_name(pg_server: PgServer,
                                                            pg_url: str) -> None:
    database = pg_url.rsplit("/", 1)[1]
    with psycopg.connect(pg_url, application_name="the-listener") as conn:
        found = [s for s in pg_server.sessions(database) if s.application == "the-listener"]
        assert [s.pid for s in found] == [conn.info.backend_pid]
    assert all(s.application != "the-listener" for s in pg_server.sessions(database))


@pytest.mark.pg_fresh  # a table of its own, CREATE EXTENSION pgstattuple
def test_an_open_transaction_pins_dead_rows(pg_server: PgServer, pg_url: str) -> None:
    database = pg_url.rsplit("/", 1)[1]
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("CREATE EXTENSION pgstattuple")  # exact counts, not the lagging stats
        conn.execute("CREATE TABLE q (id int)")
        conn.execute("INSERT INTO q SELECT generate_series(1, 100)")

        def dead_after_vacuum() -> int:
            conn.execute("DELETE FROM q")
            conn.execute("INSERT INTO q SELECT generate_series(1, 100)")
            conn.execute("VACUUM q")
            row = conn.execute("SELECT dead_tuple_count FROM pgstattuple('q')").fetchone()
            assert row is not None
            return int(row[0])

        with pg_server.open_transaction(database) as pid:
            assert pid in {s.pid for s in pg_server.sessions(database)}
            assert dead_after_vacuum() >= 100, "VACUUM must not remove rows the snapshot sees"
        assert dead_after_vacuum() == 0
