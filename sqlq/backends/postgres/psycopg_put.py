"""Enqueue through the application's own psycopg 3 connection, in its transaction.

``sqlq.put(conn, body)`` with a ``psycopg.Connection`` writes the job with the
caller's connection, so the job and the application's rows commit together or not
at all; the job's NOTIFY is part of that transaction, so workers wake when the
caller commits and never for a rollback. sqlq never commits for the caller: in a
non-autocommit connection the job joins the open (or implicitly begun)
transaction; an autocommit connection gets a transaction of its own around the put.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, TypeVar

import psycopg

from ...durations import now_ms
from ...errors import DatabaseError, SchemaError
from ...model import (
    DEFAULT_MAX_JOB_SIZE,
    DEFAULT_PRIORITY,
    DEFAULT_TTR,
    DEFAULT_TUBE,
    check_body,
    check_put_options,
    check_tube,
)
from .store import PostgresStore

T = TypeVar("T")
_store = PostgresStore()


def _run(conn: Any, fn: Callable[[Any], T]) -> T:
    if not isinstance(conn, psycopg.Connection):
        raise TypeError(f"conn must be a psycopg.Connection, not {type(conn).__name__}")
    try:
        row = conn.execute("SELECT to_regclass('sqlq_jobs') IS NOT NULL").fetchone()
        if not (row and row[0]):
            raise SchemaError("the database has no sqlq schema: open it once with "
                              "sqlq.Queue(url)")
        if conn.autocommit:
            with conn.transaction():
                return fn(conn)
        return fn(conn)
    except psycopg.Error as e:
        raise DatabaseError(f"sqlq.put: {str(e).strip().splitlines()[0]}") from e


def put(conn: Any, body: bytes | str, *, tube: str = DEFAULT_TUBE,
        priority: int = DEFAULT_PRIORITY, delay: float = 0, ttr: float = DEFAULT_TTR,
        unique_key: str | None = None, max_job_size: int = DEFAULT_MAX_JOB_SIZE) -> int:
    """``sqlq.put`` for a psycopg connection (see sqlq.enqueue.put)."""
    data = check_body(body, max_job_size)
    check_tube(tube)
    delay_ms, ttr_ms = check_put_options(priority, delay, ttr, unique_key)
    return _run(conn, lambda c: _store.insert_job(c, now_ms(), tube, priority, delay_ms,
                                                  ttr_ms, data, unique_key))


def put_many(conn: Any, bodies: Iterable[bytes | str], *, tube: str = DEFAULT_TUBE,
             priority: int = DEFAULT_PRIORITY, delay: float = 0, ttr: float = DEFAULT_TTR,
             max_job_size: int = DEFAULT_MAX_JOB_SIZE) -> list[int]:
    """``sqlq.put_many`` for a psycopg connection (see sqlq.enqueue.put_many)."""
    if isinstance(bodies, (bytes, str)):
        raise TypeError("bodies must be an iterable of bodies, not a single body")
    data = [check_body(b, max_job_size) for b in bodies]
    check_tube(tube)
    delay_ms, ttr_ms = check_put_options(priority, delay, ttr)
    return _run(conn, lambda c: _store.insert_jobs(c, now_ms(), tube, priority, delay_ms,
                                                   ttr_ms, data))
