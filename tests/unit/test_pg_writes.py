"""What each hot write costs PostgreSQL, read from the WAL it writes (pg_walinspect):
the records a verb adds to the jobs table, not how long it took (timing is the bench's)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable

import psycopg
import pytest

from sqlq import Queue

pytestmark = pytest.mark.pg_fresh  # CREATE EXTENSION pg_walinspect: a database of its own


def _job_records(pg_url: str, action: Callable[[Queue], object]) -> Counter[str]:
    """The WAL records action(q) writes to the heap of sqlq_jobs, by type (only this
    database's table: other tests share the server)."""
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("CREATE EXTENSION IF NOT EXISTS pg_walinspect")
        rel = conn.execute("SELECT d.oid, pg_relation_filenode('sqlq_jobs') FROM pg_database"
                           " AS d WHERE d.datname = current_database()").fetchone()
        assert rel is not None
        with Queue(pg_url, durability="full") as q:  # full: each commit is flushed
            q.put(b"warm-up")  # the connection, its prepared statements
            start = conn.execute("SELECT pg_current_wal_flush_lsn()").fetchone()
            action(q)
        end = conn.execute("SELECT pg_current_wal_flush_lsn()").fetchone()
        assert start is not None and end is not None
        rows = conn.execute(
            "SELECT record_type FROM pg_get_wal_records_info(%s, %s)"
            " WHERE resource_manager LIKE 'Heap%%' AND block_ref LIKE %s",
            (start[0], end[0], f"%rel %/{rel[0]}/{rel[1]} %")).fetchall()
    return Counter(str(r[0]) for r in rows)


def test_a_put_without_a_unique_key_is_one_plain_insert(pg_url: str) -> None:
    """No speculative insertion (INSERT ... ON CONFLICT) for a job no unique index holds:
    it would add a HEAP_CONFIRM record and a pre-check of the arbiter index to every put."""
    records = _job_records(pg_url, lambda q: q.put(b"x"))
    assert records == Counter({"INSERT": 1}), records


def test_a_put_with_a_unique_key_still_settles_races_in_the_index(pg_url: str) -> None:
    records = _job_records(pg_url, lambda q: q.put(b"x", unique_key="k"))
    assert records == Counter({"INSERT": 1, "HEAP_CONFIRM": 1}), records
