"""The apsw connection's kept cursor (drivers.ApswConnection.hot): the hot path's
statements run on it, and an exception between a statement and the read of its rows
leaves no statement open there (an autocommit write holding the write lock)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import apsw
import pytest

import sqlq
from sqlq.backends.sqlite.drivers import ApswConnection

pytestmark = pytest.mark.sqlite_only


class Interrupted(BaseException):
    """What a KeyboardInterrupt between two bytecodes would be."""


def test_an_interrupted_hot_statement_commits_and_frees_the_lock(tmp_path: Path) -> None:
    path = str(tmp_path / "q.db")
    with sqlq.Queue(path, durability="normal") as q:
        q.put(b"a")
        db = q.backend.db
        assert isinstance(db.conn, ApswConnection)

        def claim_then_interrupted(conn: Any) -> None:
            # A claim with RETURNING: its write is done at its first row, its commit at
            # its end; the rows are never read.
            conn.hot.execute("UPDATE sqlq_jobs SET state = 2, reserved_until = 1, lease = 7"
                             " RETURNING id")
            raise Interrupted

        with pytest.raises(Interrupted):
            db.write(claim_then_interrupted, single=True)
        other = apsw.Connection(path)
        other.set_busy_timeout(0)
        other.execute("BEGIN IMMEDIATE")  # the write lock is free: no BusyError
        assert other.execute("SELECT state FROM sqlq_jobs").fetchall() == [(2,)]
        other.execute("ROLLBACK")
        other.close()
        # The connection's cursor still works (a new one).
        assert q.put(b"b") == 2
        assert db.conn.hot.execute("SELECT count(*) FROM sqlq_jobs").fetchall() == [(2,)]


def test_the_worker_loop_runs_on_the_kept_cursor(tmp_path: Path) -> None:
    """Once a reserve has learnt its tubes, a put, a claim, a delete and the worker's
    delete-and-claim make no cursor of their own."""
    with sqlq.Queue(str(tmp_path / "q.db"), durability="normal") as q:
        q.put_many([b"a"] * 10)
        job = q.reserve(timeout=0)
        assert job is not None
        job = q.reserve(timeout=0, delete=job)  # the first of each learns its tubes
        conn = q.backend.db.conn
        made: list[str] = []
        hot: list[str] = []

        def trace(cursor: apsw.Cursor, sql: str, bindings: Any) -> bool:
            (hot if cursor is conn.hot else made).append(sql)
            return True

        conn.exec_trace = trace
        q.put(b"b")
        for _ in range(5):  # jobs are left: no claim comes back empty (its reads differ)
            assert job is not None
            job = q.reserve(timeout=0, delete=job)
        assert job is not None
        job.delete()
        job = q.reserve(timeout=0)
        assert job is not None
        job.delete()
        conn.exec_trace = None
        assert made == []
        assert len(hot) > 20
