"""A Queue over Python's sqlite3 (``driver="sqlite3"``): the application that uses sqlite3
itself, one SQLite library in the process, and both drivers on one file across processes.

The core suites (lifecycle, results, transactions, wakeup, properties) also run through
this driver (the ``sqlite3_driver`` marker, tests/conftest.py); here is what is its own.
"""

from __future__ import annotations

import os
import sqlite3
import stat
import time

import pytest

import sqlq
from sqlq.backends.sqlite import drivers
from tests.conftest import spawn

WORKER = """
import sys, sqlq
q = sqlq.Queue(sys.argv[1], durability="normal", driver=sys.argv[2])
print("ready", flush=True)
for _ in range(int(sys.argv[3])):
    job = q.reserve("emails", timeout=30)
    if job is None:
        print("timeout", flush=True); break
    job.complete(job.body.upper())
    print(job.id, flush=True)
q.close()
"""


@pytest.fixture
def app_file(db_path: str) -> str:
    """A sqlq file that also holds the application's ``orders`` table."""
    with sqlq.Queue(db_path, driver="sqlite3") as q, q.transaction() as tx:
        tx.execute("CREATE TABLE orders (id INTEGER PRIMARY KEY, item TEXT NOT NULL)")
    return db_path


def test_web_app_enqueues_in_its_transaction_and_reads_results_in_one_process(
        app_file: str) -> None:
    """The issue's use case: the app's own sqlite3 connection enqueues with its rows, and a
    sqlite3-driver Queue in the same process reads results and stats; the worker is
    another process (apsw, sqlq's default)."""
    rounds = 5
    worker = spawn(WORKER, app_file, "apsw", str(rounds))
    assert worker.stdout is not None and worker.stdout.readline().strip() == "ready"
    conn = sqlite3.connect(app_file)  # held open all along, as a web app's would be
    with sqlq.Queue(app_file, driver="sqlite3") as q:
        for i in range(rounds):
            with conn:
                conn.execute("INSERT INTO orders (item) VALUES (?)", (f"book {i}",))
                jid = sqlq.put(conn, f"order {i}", tube="emails")
            assert q.result(jid, timeout=30) == f"ORDER {i}".encode()
            assert int(worker.stdout.readline()) == jid
        # A put rolled back with the app's transaction is not there.
        with pytest.raises(RuntimeError), conn:
            conn.execute("INSERT INTO orders (item) VALUES ('lost')")
            sqlq.put(conn, b"lost", tube="emails")
            raise RuntimeError
        assert q.stats()["total-jobs"] == rounds and q.stats()["current-jobs-ready"] == 0
        # q.transaction() sees the app's table too, in the same library.
        with q.transaction() as tx:
            assert tx.execute("SELECT count(*) FROM orders") == [(rounds,)]
            tx.put(b"from the queue", tube="other")
    conn.close()
    assert worker.wait(timeout=30) == 0


@pytest.mark.parametrize(("putter", "waiter"), [("sqlite3", "apsw"), ("apsw", "sqlite3")])
def test_a_put_wakes_a_worker_of_the_other_driver_in_another_process(
        db_path: str, putter: str, waiter: str) -> None:
    sqlq.Queue(db_path).close()
    rounds = 20
    worker = spawn(WORKER, db_path, waiter, str(rounds))
    assert worker.stdout is not None and worker.stdout.readline().strip() == "ready"
    latencies = []
    with sqlq.Queue(db_path, durability="full", driver=putter) as q:
        for i in range(rounds):
            time.sleep(0.02)  # the worker is asleep in reserve by now
            start = time.monotonic()
            jid = q.put(f"job {i}", tube="emails")
            line = worker.stdout.readline().strip()
            assert line == str(jid), f"worker said {line!r}: a wakeup was lost"
            latencies.append(time.monotonic() - start)
            assert q.result(jid, timeout=30) == f"JOB {i}".encode()
    assert worker.wait(timeout=30) == 0
    # A lost wakeup would wait for the 30 s fallback; a put-to-wake takes ~1 ms.
    assert max(latencies) < 5.0


# -- one SQLite library per process -------------------------------------------------------------

def test_the_guard_refuses_a_real_mix_and_only_that(app_file: str) -> None:
    with sqlq.Queue(app_file, driver="sqlite3") as q:
        conn = sqlite3.connect(app_file)
        conn.execute("SELECT count(*) FROM orders").fetchone()  # the file is open
        with sqlq.Queue(app_file, driver="sqlite3") as second:  # same library: allowed
            second.put(b"x")
        sqlq.put(conn, b"y")  # same library: allowed
        conn.commit()
        with pytest.raises(sqlq.DatabaseError, match="another SQLite library"):
            sqlq.Queue(app_file)  # apsw beside sqlite3: a mix
        assert q.stats()["total-jobs"] == 2
        conn.close()
    with sqlq.Queue(app_file) as q:  # apsw first
        with pytest.raises(sqlq.DatabaseError, match="another SQLite library"):
            sqlq.Queue(app_file, driver="sqlite3")
        conn = sqlite3.connect(app_file)
        with pytest.raises(sqlq.DatabaseError, match="driver='sqlite3'"):
            sqlq.put(conn, b"x")
        conn.close()
    # Once every Queue is closed, either library may open the file again.
    sqlq.Queue(app_file, driver="sqlite3").close()
    sqlq.Queue(app_file).close()


def test_queue_opened_with_sqlite3_beside_the_apps_connection(app_file: str) -> None:
    """The app's connection first, then the Queue: the order that apsw refuses."""
    conn = sqlite3.connect(app_file)
    conn.execute("SELECT count(*) FROM orders").fetchone()
    with sqlq.Queue(app_file, driver="sqlite3") as q:
        assert q.put(b"x") == 1
    conn.close()


# -- the same contract --------------------------------------------------------------------------

def test_new_file_is_0600_wal_and_has_the_schema_apsw_makes(tmp_path: object) -> None:
    a, b = f"{tmp_path}/a.db", f"{tmp_path}/b.db"
    sqlq.Queue(a).close()
    sqlq.Queue(b, driver="sqlite3").close()
    assert stat.S_IMODE(os.stat(b).st_mode) == 0o600

    def schema(path: str) -> list[tuple[str, str]]:
        conn = sqlite3.connect(path)
        try:
            assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
            return conn.execute("SELECT name, sql FROM sqlite_master ORDER BY name").fetchall()
        finally:
            conn.close()

    assert schema(a) == schema(b)


def test_errors_are_sqlq_errors_in_one_line(tmp_path: object) -> None:
    junk = f"{tmp_path}/junk.db"
    with open(junk, "wb") as f:
        f.write(b"x" * 4096)
    with pytest.raises(sqlq.SchemaError, match="not a SQLite database"):
        sqlq.Queue(junk, driver="sqlite3")
    with pytest.raises(ValueError, match="driver must be one of"):
        sqlq.Queue(f"{tmp_path}/q.db", driver="sqlite4")
    with pytest.raises(ValueError, match="SQLite files only"):
        sqlq.Queue("postgresql://localhost/x", driver="sqlite3")


def test_lock_held_by_another_process(db_path: str) -> None:
    """Busy handling: a lock held briefly is waited out; one held past lock_wait is Locked."""
    sqlq.Queue(db_path).close()
    holder = spawn("""
        import sys, time, sqlite3
        conn = sqlite3.connect(sys.argv[1], isolation_level=None)
        conn.execute("BEGIN IMMEDIATE")
        print("locked", flush=True)
        time.sleep(float(sys.argv[2]))
        conn.execute("COMMIT")
    """, db_path, "1.0")
    assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"
    with sqlq.Queue(db_path, driver="sqlite3") as q:
        start = time.monotonic()
        q.put(b"waited")
        assert 0.3 < time.monotonic() - start < 30
        holder.wait(timeout=30)
        holder = spawn("""
            import sys, time, sqlite3
            conn = sqlite3.connect(sys.argv[1], isolation_level=None)
            conn.execute("BEGIN IMMEDIATE")
            print("locked", flush=True)
            time.sleep(float(sys.argv[2]))
        """, db_path, "5")
        assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"
        q.lock_wait = 0.2
        with pytest.raises(sqlq.Locked, match="locked by another process"):
            q.put(b"refused")
        holder.kill()
        holder.wait(timeout=30)


def test_an_old_system_sqlite_is_refused(db_path: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sqlite3, "sqlite_version_info", (3, 31, 1))
    monkeypatch.setattr(sqlite3, "sqlite_version", "3.31.1")
    with pytest.raises(sqlq.DatabaseError, match=r"SQLite 3\.31\.1; sqlq needs 3\.35"):
        sqlq.Queue(db_path, driver="sqlite3")
    assert not os.path.exists(db_path)


def test_scripts_split_whole_statements() -> None:
    script = """CREATE TABLE t (x);
    CREATE TRIGGER tr AFTER INSERT ON t BEGIN SELECT 1; SELECT 2; END;
    -- a comment
    INSERT INTO t VALUES (';')"""
    assert [s.split()[0:2] for s in drivers.statements(script)] == [
        ["CREATE", "TABLE"], ["CREATE", "TRIGGER"], ["--", "a"]]


def test_a_deleted_wal_stops_the_queue(db_path: str) -> None:
    with sqlq.Queue(db_path, driver="sqlite3") as q:
        q.put(b"before")
        os.unlink(f"{db_path}-wal")
        with pytest.raises(sqlq.DatabaseError, match="-wal file was deleted"):
            q.put(b"lost on close")


def test_error_codes_without_sqlite_errorcode() -> None:
    """Python 3.10's sqlite3 errors carry no code: the message names it."""
    driver = drivers.DRIVERS["sqlite3"]
    assert driver.busy(sqlite3.OperationalError("database is locked"))
    assert driver.code(sqlite3.DatabaseError("file is not a database")) == 26
    assert driver.code(sqlite3.ProgrammingError("Cannot operate on a closed database.")) == -1


def test_many_rows_in_one_statement(tmp_path: object,
                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """The Store's executemany paths (histograms, copy), through the sqlite3 driver."""
    from sqlq.copy import copy
    from sqlq.histograms import Tally

    source, target = f"{tmp_path}/a.db", f"{tmp_path}/b.db"
    with sqlq.Queue(source) as q:
        q.put_many([b"1", b"2", b"3"], tube="t")
    monkeypatch.setenv("SQLQ_SQLITE_DRIVER", "sqlite3")  # the default of copy's Queues
    copy(source, target)
    with sqlq.Queue(target) as q:
        assert q.backend.db.driver.name == "sqlite3"  # type: ignore[attr-defined]
        assert q.stats_tube("t")["current-jobs-ready"] == 3
        tally = Tally()
        tally.observe("t", "run", 0.5)
        q.record_durations(tally)
        assert [(h.metric, h.count) for h in q.views.duration_histograms() if h.tube == "t"] \
            == [("run", 1)]


def test_each_write_commits_with_the_durability_it_needs(db_path: str) -> None:
    """As with apsw (tests/integration/test_durability.py counts the fsyncs through an
    apsw VFS, which the system's SQLite cannot load): a put syncs, a claim does not, in
    full durability."""
    with sqlq.Queue(db_path, driver="sqlite3") as q:
        db = q.backend.db  # type: ignore[attr-defined]

        def synchronous() -> int:
            return int(db.conn.execute("PRAGMA synchronous").fetchall()[0][0])

        q.put(b"x")
        assert synchronous() == 2  # FULL
        job = q.reserve(timeout=0)
        assert job is not None and synchronous() == 1  # NORMAL: a lost claim is harmless
        job.delete()
        assert synchronous() == 2
