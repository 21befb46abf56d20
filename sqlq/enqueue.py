"""``sqlq.put(conn, …)``: enqueue through the application's own connection, in its
transaction, so the job and the application's rows commit together or not at all.

The connection's driver picks the backend: Python's ``sqlite3`` for a SQLite file,
psycopg 3 for PostgreSQL. Either way sqlq never commits a transaction it did not
open, and the job wakes workers when the caller commits.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable
from typing import Any

from .backends import for_connection
from .core.durations import now_ms
from .model import DEFAULT_MAX_JOB_SIZE, DEFAULT_PRIORITY, DEFAULT_TTR, DEFAULT_TUBE, check_body
from .putting import describe_put
from .verbs import Verbs
from .verbs.dispatch import OnConnection


def verbs_on(conn: Any) -> Verbs:
    """The verbs on the application's connection, in its transaction (its driver's)."""
    driver = for_connection(conn)
    return Verbs(OnConnection(functools.partial(driver.run, conn), now_ms), driver.STORE)


def dbapi_connection(conn: Any) -> Any:
    """The DB-API connection under a framework's: Django's ``connection`` (a
    DatabaseWrapper), an SQLAlchemy ``Connection`` or ``Session``; else ``conn``."""
    if hasattr(conn, "ensure_connection") and hasattr(conn, "vendor"):  # Django
        conn.ensure_connection()
        return conn.connection
    if hasattr(conn, "get_bind") and callable(getattr(conn, "connection", None)):
        conn = conn.connection()  # an SQLAlchemy Session: its Connection
    raw = getattr(getattr(conn, "connection", None), "dbapi_connection", None)
    return conn if raw is None else raw


def put(conn: Any, body: bytes | str, *, tube: str = DEFAULT_TUBE,
        priority: int = DEFAULT_PRIORITY, delay: float = 0, ttr: float = DEFAULT_TTR,
        unique_key: str | None = None, max_job_size: int = DEFAULT_MAX_JOB_SIZE,
        after: int | Iterable[int] | None = None, on_conflict: str = "keep",
        group: str | None = None) -> int:
    """Put a job through the application's own connection, in its transaction.

    Args:
        conn: an open ``sqlite3.Connection`` to a sqlq file, or a ``psycopg.Connection``
            to a database sqlq has used.
        body: the job body (str is UTF-8 encoded).
        max_job_size: the largest body accepted, as ``Queue(max_job_size=)``.
        tube, priority, delay, ttr, unique_key, after, on_conflict, group: as in ``Queue.put``.

    Returns:
        The job's id (with ``unique_key``, the live job's id if there is one).

    Raises:
        JobNotFound: an id of ``after`` was never issued (nothing is put).
        SchemaError: the database has no sqlq schema (or a newer one).
        DatabaseError: the database refused the write.
    """
    described = describe_put(tube, priority, delay, ttr, unique_key, after, on_conflict,
                             group)
    verbs = verbs_on(conn)
    data = check_body(body, max_job_size)
    return verbs.put(described, data)


def put_many(conn: Any, bodies: Iterable[bytes | str], *, tube: str = DEFAULT_TUBE,
             priority: int = DEFAULT_PRIORITY, delay: float = 0, ttr: float = DEFAULT_TTR,
             max_job_size: int = DEFAULT_MAX_JOB_SIZE,
             after: int | Iterable[int] | None = None,
             group: str | None = None) -> list[int]:
    """Put many jobs through the application's own connection: all or none; ids in order.

    Same transaction rules and arguments as :func:`put`.
    """
    described = describe_put(tube, priority, delay, ttr, None, after, group=group)
    verbs = verbs_on(conn)
    if isinstance(bodies, (bytes, str)):
        raise TypeError("bodies must be an iterable of bodies, not a single body")
    data = [check_body(b, max_job_size) for b in bodies]
    return verbs.put_many(described, data)


__all__ = ["dbapi_connection", "put", "put_many", "verbs_on"]
