"""Enqueue through the application's own stdlib ``sqlite3`` connection.

``sqlq.put(conn, body)`` writes the job with the caller's connection, so the job
and the application's rows commit together or not at all: an order and its
"send the confirmation e-mail" job can never be split by a crash. (goqite's
``Send``/``SendTx`` pair is the model.) It behaves as the caller's own INSERT
would, whatever sqlite3 transaction mode the connection is in:

* a transaction is open (``conn.in_transaction``, which is always the case with
  ``autocommit=False`` on Python 3.12+): the job joins it and is committed or
  rolled back with it, by the caller;
* legacy mode with an ``isolation_level`` (the default): sqlite3 would open a
  transaction before an INSERT and leave it for ``conn.commit()``; we open it
  (``BEGIN IMMEDIATE``) and leave it just the same;
* autocommit (``isolation_level=None``, or ``autocommit=True`` on 3.12+): the
  put runs in a transaction of its own, committed before it returns, so
  ``put_many`` is still all or nothing.

sqlq never commits a transaction it did not open. Workers blocked in
``reserve`` wake when the caller commits: they watch the ``-wal`` file, which
any SQLite library writes.

The SQL is ``queries.sql``'s, run by ``store.py``'s own functions: they need
only ``execute(sql, params)`` and ``fetchone()``, which ``drivers.Connection``
adapts (as it does for a Queue opened with ``driver="sqlite3"``).
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Callable
from typing import Any, TypeVar, cast

from tenacity import Retrying, retry_if_exception, stop_after_delay, wait_random_exponential

from ...errors import DatabaseError, SchemaError
from ..locations import identity, is_url
from . import migrate
from .db import BUSY_GIVE_UP_S, open_through_sqlq
from .drivers import Connection, check_version, immediate
from .store import SQLiteStore

T = TypeVar("T")
#: The verbs, run on a sqlite3 connection through drivers.Connection.
STORE = SQLiteStore()


def _is_busy(exc: BaseException) -> bool:
    return isinstance(exc, sqlite3.OperationalError) and "locked" in str(exc)


_begin_retrying = Retrying(
    retry=retry_if_exception(_is_busy),
    wait=wait_random_exponential(multiplier=0.002, max=0.25),
    stop=stop_after_delay(BUSY_GIVE_UP_S),
    reraise=True,
)


def _autocommits(conn: sqlite3.Connection) -> bool:
    """True if a statement outside a transaction would commit at once (no implicit BEGIN)."""
    autocommit = getattr(conn, "autocommit", None)  # Python 3.12+; -1 means legacy control
    if autocommit is True:
        return True
    if autocommit is False:
        return False  # PEP 249 mode: sqlite3 keeps a transaction open for the caller
    return conn.isolation_level is None


def _check_schema(db: Connection) -> None:
    """SchemaError unless the file holds sqlq's tables, at a version this sqlq knows."""
    version = migrate.schema_version(cast(Any, db), allow_foreign=True)
    if version == 0:
        raise SchemaError("the database has no sqlq schema: open it once with "
                          "sqlq.Queue(path) (init=True to add sqlq to an existing database)")


def _check_one_sqlite(db: Connection) -> None:
    """Refuse a file this process also has open through a sqlq.Queue of the apsw
    driver (apsw's own SQLite); a Queue of the sqlite3 driver shares this library.

    Two copies of SQLite in one process ignore each other's locks (see db.py), so
    this connection and a Queue could both write at once and corrupt the file.
    """
    for _, name, path in db.execute("PRAGMA database_list").fetchall():
        if name == "main" and path and open_through_sqlq(path, "apsw"):
            raise DatabaseError(
                f"{path}: this process also has a sqlq.Queue open on it through apsw; two "
                "SQLite libraries in one process ignore each other's locks. Open that "
                "Queue with driver='sqlite3', or use its transaction() here")


def run(conn: sqlite3.Connection, fn: Callable[[Any], T]) -> T:
    """Run fn(adapter) in the caller's transaction, or in one we open (see module doc);
    fn uses :data:`STORE` on the adapter."""
    if not isinstance(conn, sqlite3.Connection):
        raise TypeError(f"conn must be a sqlite3.Connection, not {type(conn).__name__}")
    check_version()
    db = Connection(conn)
    try:
        _check_one_sqlite(db)
        _check_schema(db)
        if conn.in_transaction:
            return fn(db)
        # We can retry a BEGIN, not a caller's transaction. On a rollback only our own
        # statements are in it; in legacy mode the caller commits, as after its INSERT.
        with immediate(db, begin=lambda: _begin_retrying(conn.execute, "BEGIN IMMEDIATE"),
                       commit=_autocommits(conn)):
            return fn(db)
    except sqlite3.Error as e:
        raise DatabaseError(f"sqlq.put: {e}") from e


def same_database(conn: sqlite3.Connection, location: str) -> bool:
    """Whether conn's main database is the file at location (any spelling of it: a
    symlink, a relative path); False for a URL or an in-memory database."""
    if is_url(location):
        return False
    for _, name, path in conn.execute("PRAGMA database_list").fetchall():
        if name == "main":
            return bool(path) and _same_file(path, location)
    return False


def _same_file(a: str, b: str) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return identity(a) == identity(b)


__all__ = ["STORE", "run", "same_database"]
