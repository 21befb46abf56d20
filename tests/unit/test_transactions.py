"""Enqueue in the application's own transaction: q.transaction() (apsw) and sqlq.put (sqlite3).

Both paths must commit the application's rows and the jobs together, or neither,
including when an exception interrupts the block half-way.
"""

from __future__ import annotations

import sqlite3
import sys
from collections.abc import Iterator

import pytest

import sqlq


class Boom(Exception):
    pass


@pytest.fixture(params=["apsw", "sqlite3"])
def app(db_path: str, request: pytest.FixtureRequest,
        monkeypatch: pytest.MonkeyPatch) -> Iterator[sqlq.Queue]:
    """A queue whose file also holds the application's ``orders`` table, through each
    driver (the test's other Queues open the file through the same one)."""
    monkeypatch.setenv("SQLQ_SQLITE_DRIVER", request.param)
    with sqlq.Queue(db_path, durability="normal") as queue:
        with queue.transaction() as tx:
            tx.execute("CREATE TABLE orders (id INTEGER PRIMARY KEY, item TEXT NOT NULL)")
        yield queue


def orders(q: sqlq.Queue) -> list[int]:
    with q.transaction() as tx:
        return [row[0] for row in tx.execute("SELECT id FROM orders ORDER BY id")]


def jobs(q: sqlq.Queue, tube: str = "emails") -> int:
    return int(q.stats_tube(tube)["current-jobs-ready"]) if tube in q.tubes() else 0


# -- q.transaction() ---------------------------------------------------------------------------

def test_transaction_commits_rows_and_jobs_together(app: sqlq.Queue) -> None:
    with app.transaction() as tx:
        tx.execute("INSERT INTO orders (id, item) VALUES (?, ?)", (7, "book"))
        jid = tx.put(b"order 7 placed", tube="emails")
        more = tx.put_many([b"a", b"b"], tube="emails")
    assert orders(app) == [7]
    assert [j.body for j in (app.peek(jid), app.peek(more[1])) if j] == [b"order 7 placed", b"b"]


def test_exception_in_the_middle_rolls_back_rows_and_jobs(app: sqlq.Queue) -> None:
    with pytest.raises(Boom):
        with app.transaction() as tx:
            tx.execute("INSERT INTO orders (id, item) VALUES (1, 'book')")
            jid = tx.put(b"order 1 placed", tube="emails")
            raise Boom()
    assert orders(app) == []
    assert app.peek(jid) is None
    assert jobs(app) == 0


def test_failing_sql_rolls_back_the_puts_before_it(app: sqlq.Queue) -> None:
    with pytest.raises(sqlq.Error):
        with app.transaction() as tx:
            tx.put(b"x", tube="emails")
            tx.execute("INSERT INTO orders (id, item) VALUES (1, NULL)")  # NOT NULL fails
    assert jobs(app) == 0


def test_nested_transaction_is_a_savepoint(app: sqlq.Queue) -> None:
    with app.transaction() as outer:
        outer.execute("INSERT INTO orders (id, item) VALUES (1, 'kept')")
        kept = outer.put(b"kept", tube="emails")
        with pytest.raises(Boom):
            with app.transaction() as inner:
                inner.execute("INSERT INTO orders (id, item) VALUES (2, 'dropped')")
                dropped = inner.put(b"dropped", tube="emails")
                raise Boom()
        with app.transaction() as inner:
            inner.put(b"inner kept", tube="emails")
    assert orders(app) == [1]
    kept_job = app.peek(kept)
    assert kept_job is not None and kept_job.body == b"kept"
    bodies = [app.peek(i).body for i in (kept, dropped) if app.peek(i)]  # type: ignore[union-attr]
    assert b"dropped" not in bodies  # (a rolled-back id may be handed out again)
    assert jobs(app) == 2


def test_nested_failure_propagating_rolls_back_everything(app: sqlq.Queue) -> None:
    with pytest.raises(Boom):
        with app.transaction() as outer:
            outer.put(b"a", tube="emails")
            with app.transaction() as inner:
                inner.put(b"b", tube="emails")
                raise Boom()
    assert jobs(app) == 0


def test_transaction_publish(app: sqlq.Queue) -> None:
    app.subscribe("orders", "emails")
    app.subscribe("orders", "audit")
    with pytest.raises(Boom):
        with app.transaction() as tx:
            tx.execute("INSERT INTO orders (id, item) VALUES (1, 'book')")
            tx.publish("orders", b"order 1")
            raise Boom()
    assert jobs(app, "emails") == jobs(app, "audit") == 0
    with app.transaction() as tx:
        tx.execute("INSERT INTO orders (id, item) VALUES (1, 'book')")
        ids = tx.publish("orders", b"order 1")
    assert len(ids) == 2 and jobs(app, "emails") == jobs(app, "audit") == 1


def test_other_queues_see_the_jobs_only_after_commit(app: sqlq.Queue, db_path: str) -> None:
    with sqlq.Queue(db_path, durability="normal") as worker:
        with app.transaction() as tx:
            jid = tx.put(b"x", tube="emails")
            # (a claim would wait for the write lock: keep transactions short)
            assert worker.peek(jid) is None
        job = worker.reserve("emails", timeout=5)
        assert job is not None and job.body == b"x"


# -- sqlq.put on a stdlib sqlite3 connection ---------------------------------------------------
#
# A process uses one SQLite library per file: Python's sqlite3 here, so these tests
# observe through a second sqlite3 connection and open a Queue only once the
# application's connection is closed (sqlq refuses to mix the two, see db.py).


class Observer:
    """What another connection sees: committed rows only."""

    def __init__(self, path: str) -> None:
        self.conn = sqlite3.connect(path, isolation_level=None)

    def orders(self) -> list[int]:
        return [r[0] for r in self.conn.execute("SELECT id FROM orders ORDER BY id")]

    def has_job(self, job_id: int) -> bool:
        return self.conn.execute("SELECT 1 FROM sqlq_jobs WHERE id = ?",
                                 (job_id,)).fetchone() is not None

    def jobs(self, tube: str = "emails") -> int:
        return int(self.conn.execute("SELECT count(*) FROM sqlq_jobs WHERE tube = ?",
                                     (tube,)).fetchone()[0])


@pytest.fixture
def seen(app_file: str) -> Iterator[Observer]:
    observer = Observer(app_file)
    yield observer
    observer.conn.close()


def test_stdlib_put_joins_the_callers_transaction(app_file: str, seen: Observer) -> None:
    conn = sqlite3.connect(app_file)  # legacy mode: INSERT opens a transaction, commit() ends it
    conn.execute("INSERT INTO orders (id, item) VALUES (1, 'book')")
    jid = sqlq.put(conn, b"order 1 placed", tube="emails")
    assert conn.in_transaction
    assert not seen.has_job(jid)  # not visible before the caller commits
    conn.commit()
    assert seen.orders() == [1]
    assert seen.has_job(jid)
    conn.close()


def test_stdlib_rollback_drops_rows_and_jobs(app_file: str, seen: Observer) -> None:
    conn = sqlite3.connect(app_file)
    conn.execute("INSERT INTO orders (id, item) VALUES (1, 'book')")
    sqlq.put_many(conn, [b"a", b"b"], tube="emails")
    conn.rollback()
    assert seen.orders() == [] and seen.jobs() == 0
    conn.close()


def test_stdlib_exception_in_with_block_rolls_back(app_file: str, seen: Observer) -> None:
    conn = sqlite3.connect(app_file)
    with pytest.raises(Boom):
        with conn:  # sqlite3's own context manager: commit, or rollback on exception
            conn.execute("INSERT INTO orders (id, item) VALUES (1, 'book')")
            sqlq.put(conn, b"order 1 placed", tube="emails")
            raise Boom()
    assert seen.orders() == [] and seen.jobs() == 0
    with conn:
        conn.execute("INSERT INTO orders (id, item) VALUES (2, 'pen')")
        sqlq.put(conn, b"order 2 placed", tube="emails")
    assert seen.orders() == [2] and seen.jobs() == 1
    conn.close()


def test_stdlib_put_alone_leaves_the_commit_to_the_caller(app_file: str,
                                                          seen: Observer) -> None:
    conn = sqlite3.connect(app_file)
    jid = sqlq.put(conn, b"x", tube="emails")  # as the caller's own INSERT would
    assert conn.in_transaction and not seen.has_job(jid)
    conn.commit()
    assert seen.has_job(jid)
    conn.close()


def test_stdlib_autocommit_connection_commits_its_own_transaction(app_file: str,
                                                                  seen: Observer) -> None:
    conn = sqlite3.connect(app_file, isolation_level=None)
    ids = sqlq.put_many(conn, [b"a", b"b"], tube="emails")
    assert not conn.in_transaction
    assert [seen.has_job(i) for i in ids] == [True, True]
    conn.execute("BEGIN")
    sqlq.put(conn, b"c", tube="emails")
    conn.execute("INSERT INTO orders (id, item) VALUES (1, 'book')")
    conn.execute("ROLLBACK")
    assert seen.jobs() == 2 and seen.orders() == []
    conn.close()


@pytest.mark.skipif(sys.version_info < (3, 12), reason="sqlite3 autocommit= is Python 3.12+")
def test_stdlib_pep249_autocommit_false(app_file: str, seen: Observer) -> None:
    conn = sqlite3.connect(app_file, autocommit=False)  # type: ignore[call-arg]
    jid = sqlq.put(conn, b"x", tube="emails")
    conn.rollback()
    assert not seen.has_job(jid)
    jid = sqlq.put(conn, b"y", tube="emails")
    conn.commit()
    assert seen.has_job(jid)
    conn.close()


@pytest.mark.skipif(sys.version_info < (3, 12), reason="sqlite3 autocommit= is Python 3.12+")
def test_stdlib_pep249_autocommit_true(app_file: str, seen: Observer) -> None:
    conn = sqlite3.connect(app_file, autocommit=True)  # type: ignore[call-arg]
    jid = sqlq.put(conn, b"x", tube="emails")
    assert seen.has_job(jid)
    conn.close()


def test_stdlib_put_checks_like_queue_put(app_file: str) -> None:
    conn = sqlite3.connect(app_file)
    conn.row_factory = sqlite3.Row  # whatever the application likes; sqlq reads tuples
    with pytest.raises(sqlq.InvalidTube):
        sqlq.put(conn, b"x", tube="-bad")
    with pytest.raises(sqlq.JobTooBig):
        sqlq.put(conn, b"x" * 11, max_job_size=10)
    with pytest.raises(TypeError, match="priority"):
        sqlq.put(conn, b"x", priority="high")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="bodies"):
        sqlq.put_many(conn, b"not a list")
    with pytest.raises(TypeError, match="sqlite3.Connection"):
        sqlq.put(object(), b"x")  # type: ignore[arg-type]
    assert not conn.in_transaction  # nothing half-done was left behind
    first = sqlq.put(conn, b"x", tube="emails", unique_key="k", delay=10, priority=5, ttr=30)
    assert sqlq.put(conn, b"y", tube="emails", unique_key="k") == first
    conn.commit()
    conn.close()
    with sqlq.Queue(app_file) as q:
        job = q.peek(first)
        assert job is not None and (job.state, job.priority, job.ttr) == ("delayed", 5, 30.0)


def test_stdlib_put_refuses_a_file_a_queue_holds_in_this_process(app_file: str) -> None:
    """Two SQLite libraries in one process ignore each other's locks: refused, clearly."""
    with sqlq.Queue(app_file) as q:
        conn = sqlite3.connect(app_file)
        with pytest.raises(sqlq.DatabaseError, match="also has a sqlq.Queue open"):
            sqlq.put(conn, b"x")
        assert not conn.in_transaction
        conn.close()
        assert q.stats()["total-jobs"] == 0


def test_queue_refuses_a_file_sqlite3_holds_in_this_process(app_file: str) -> None:
    conn = sqlite3.connect(app_file)
    conn.execute("SELECT count(*) FROM orders").fetchone()
    with pytest.raises(sqlq.DatabaseError, match="another SQLite library"):
        sqlq.Queue(app_file)
    conn.close()
    sqlq.Queue(app_file).close()


def test_stdlib_put_refuses_a_file_without_sqlq(tmp_path: object) -> None:
    conn = sqlite3.connect(":memory:")
    conn.execute("CREATE TABLE orders (id)")
    with pytest.raises(sqlq.SchemaError, match="no sqlq schema"):
        sqlq.put(conn, b"x")
    assert not conn.in_transaction
    conn.close()
