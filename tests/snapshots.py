"""A snapshot held open by a second, real connection: what a report, a backup or a
forgotten ``sqlite3`` shell does to a queue (tests of sqlq/horizon.py).

In this process, without a process of its own: on SQLite an apsw connection (the
library the Queue uses: two SQLite libraries in one process would not see each
other's locks) in ``BEGIN; SELECT``; on PostgreSQL a psycopg session in a REPEATABLE
READ transaction that read a row, as ``pg_dump`` holds one.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import apsw
import psycopg

import sqlq
from sqlq.backends.locations import is_url


@contextmanager
def held_snapshot(db_url: str) -> Iterator[int | None]:
    """Hold a read snapshot of ``db_url`` until the block ends; yields the PostgreSQL
    session's pid (None on SQLite)."""
    if is_url(db_url):
        with psycopg.connect(db_url, autocommit=True) as conn:
            conn.execute("BEGIN ISOLATION LEVEL REPEATABLE READ")
            row = conn.execute("SELECT pg_backend_pid(), (SELECT count(*) FROM sqlq_jobs)"
                               ).fetchone()
            assert row is not None
            yield int(row[0])
            conn.execute("ROLLBACK")
        return
    reader = apsw.Connection(db_url)
    try:
        reader.execute("BEGIN")
        reader.execute("SELECT count(*) FROM sqlq_jobs").fetchall()
        yield None
        reader.execute("COMMIT")
    finally:
        reader.close()


def churn(q: sqlq.Queue, jobs: int = 300, size: int = 16_000) -> None:
    """Put ``jobs`` jobs of ``size`` bytes and delete them, in two commits: over a
    thousand WAL frames on SQLite (past the autocheckpoint), as many dead rows on
    PostgreSQL."""
    q.put_many([b"x" * size] * jobs, tube="churn")
    held = q.reserve_many(jobs, "churn", timeout=0)
    assert len(held) == jobs
    q.delete_many(held)
