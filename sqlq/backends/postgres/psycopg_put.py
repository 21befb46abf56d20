"""Enqueue through the application's own psycopg 3 connection, in its transaction.

``sqlq.put(conn, body)`` with a ``psycopg.Connection`` writes the job with the
caller's connection, so the job and the application's rows commit together or not
at all; the job's NOTIFY is part of that transaction, so workers wake when the
caller commits and never for a rollback. sqlq never commits for the caller: in a
non-autocommit connection the job joins the open (or implicitly begun)
transaction; an autocommit connection gets a transaction of its own around the put.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import psycopg

from ...errors import DatabaseError, SchemaError
from .store import PostgresStore

T = TypeVar("T")
#: The verbs, run on the caller's psycopg connection.
STORE = PostgresStore()


def run(conn: Any, fn: Callable[[Any], T]) -> T:
    """Run fn(conn) in the caller's transaction (or its own on an autocommit connection);
    fn uses :data:`STORE`."""
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


__all__ = ["STORE", "run"]
