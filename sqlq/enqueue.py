"""``sqlq.put(conn, …)``: enqueue through the application's own connection, in its
transaction, so the job and the application's rows commit together or not at all.

The connection's driver picks the backend: Python's ``sqlite3`` for a SQLite file,
psycopg 3 for PostgreSQL. Either way sqlq never commits a transaction it did not
open, and the job wakes workers when the caller commits.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from . import tracing
from .backends import for_connection
from .durations import now_ms
from .model import (
    DEFAULT_MAX_JOB_SIZE,
    DEFAULT_PRIORITY,
    DEFAULT_TTR,
    DEFAULT_TUBE,
    check_after,
    check_body,
    check_put_options,
    check_tube,
)


def put(conn: Any, body: bytes | str, *, tube: str = DEFAULT_TUBE,
        priority: int = DEFAULT_PRIORITY, delay: float = 0, ttr: float = DEFAULT_TTR,
        unique_key: str | None = None, max_job_size: int = DEFAULT_MAX_JOB_SIZE,
        after: int | Iterable[int] | None = None) -> int:
    """Put a job through the application's own connection, in its transaction.

    Args:
        conn: an open ``sqlite3.Connection`` to a sqlq file, or a ``psycopg.Connection``
            to a database sqlq has used.
        body: the job body (str is UTF-8 encoded).
        max_job_size: the largest body accepted, as ``Queue(max_job_size=)``.
        tube, priority, delay, ttr, unique_key, after: as in ``Queue.put``.

    Returns:
        The job's id (with ``unique_key``, the live job's id if there is one).

    Raises:
        JobNotFound: an id of ``after`` was never issued (nothing is put).
        SchemaError: the database has no sqlq schema (or a newer one).
        DatabaseError: the database refused the write.
    """
    driver = for_connection(conn)
    data = check_body(body, max_job_size)
    check_tube(tube)
    delay_ms, ttr_ms = check_put_options(priority, delay, ttr, unique_key)
    parents = check_after(after)
    if tracing.INSTALLED and tracing.active():
        return tracing.send(lambda write: driver.run(conn, write), driver.STORE, now_ms, tube,
                            priority, delay_ms, ttr_ms, (data,), unique_key, parents, False)[0]
    if parents:
        return int(driver.run(conn, lambda c: driver.STORE.deps.insert_after(
            c, now_ms(), tube, priority, delay_ms, ttr_ms, (data,), unique_key, parents)[0]))
    return int(driver.run(conn, lambda c: driver.STORE.jobs.insert_job(
        c, now_ms(), tube, priority, delay_ms, ttr_ms, data, unique_key)))


def put_many(conn: Any, bodies: Iterable[bytes | str], *, tube: str = DEFAULT_TUBE,
             priority: int = DEFAULT_PRIORITY, delay: float = 0, ttr: float = DEFAULT_TTR,
             max_job_size: int = DEFAULT_MAX_JOB_SIZE,
             after: int | Iterable[int] | None = None) -> list[int]:
    """Put many jobs through the application's own connection: all or none; ids in order.

    Same transaction rules and arguments as :func:`put`.
    """
    driver = for_connection(conn)
    if isinstance(bodies, (bytes, str)):
        raise TypeError("bodies must be an iterable of bodies, not a single body")
    data = [check_body(b, max_job_size) for b in bodies]
    check_tube(tube)
    delay_ms, ttr_ms = check_put_options(priority, delay, ttr)
    parents = check_after(after)
    if tracing.INSTALLED and tracing.active() and data:
        return tracing.send(lambda write: driver.run(conn, write), driver.STORE, now_ms, tube,
                            priority, delay_ms, ttr_ms, data, None, parents, True)
    if parents and data:
        after_ids: list[int] = driver.run(conn, lambda c: driver.STORE.deps.insert_after(
            c, now_ms(), tube, priority, delay_ms, ttr_ms, data, None, parents))
        return after_ids
    ids: list[int] = driver.run(conn, lambda c: driver.STORE.jobs.insert_jobs(
        c, now_ms(), tube, priority, delay_ms, ttr_ms, data))
    return ids


__all__ = ["put", "put_many"]
