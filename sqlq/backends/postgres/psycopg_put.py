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
from ..locations import is_url
from .store import PostgresStore

T = TypeVar("T")
_LOOPBACK = {"localhost", "127.0.0.1", "::1"}
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


def same_database(conn: psycopg.Connection[Any], location: str) -> bool:
    """Whether conn is a session of the database at location: the same database name,
    port and host (any loopback name for another; libpq's default socket for none)."""
    if not is_url(location):
        return False
    from psycopg.conninfo import conninfo_to_dict

    want = conninfo_to_dict(location)
    info = conn.info
    return (str(want.get("dbname") or want.get("user") or "") == info.dbname
            and str(want.get("port") or 5432) == str(info.port)
            and _same_host(str(want.get("host") or ""), info.host))


def _same_host(a: str, b: str) -> bool:
    # An empty host is libpq's default: its Unix socket directory, which info.host names.
    if a == b or (a in _LOOPBACK and b in _LOOPBACK):
        return True
    return a == "" and b.startswith("/")


__all__ = ["STORE", "run", "same_database"]
