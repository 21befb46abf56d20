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
only ``execute(sql, params)`` and ``fetchone()``, which we adapt below.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterable, Iterator
from typing import Any, TypeVar, cast

from tenacity import Retrying, retry_if_exception, stop_after_delay, wait_random_exponential

from ...errors import DatabaseError, SchemaError
from . import migrate
from .db import BUSY_GIVE_UP_S, open_through_sqlq
from .store import SQLiteStore

T = TypeVar("T")
#: The verbs, run on a sqlite3 connection through _Adapter.
STORE = SQLiteStore()

#: RETURNING, which queries.sql uses, arrived in SQLite 3.35.
MIN_SQLITE = (3, 35, 0)


class _Rows:
    """A finished statement's rows. Fetching them all at once steps the statement to
    its end, so no half-read INSERT ... RETURNING keeps the caller's COMMIT waiting."""

    def __init__(self, rows: list[Any]) -> None:
        self._rows = iter(rows)

    def fetchone(self) -> Any:
        return next(self._rows, None)

    def fetchall(self) -> list[Any]:
        return list(self._rows)

    def __iter__(self) -> Iterator[Any]:
        return self._rows


class _Adapter:
    """The part of an apsw connection that store.py uses, over a sqlite3 connection.

    Rows come back as plain tuples whatever ``row_factory`` the caller set.
    """

    def __init__(self, conn: sqlite3.Connection) -> None:
        self._conn = conn

    def execute(self, sql: str, params: Any = ()) -> _Rows:
        cursor = self._conn.cursor()
        cursor.row_factory = None
        try:
            return _Rows(cursor.execute(sql, params).fetchall())
        finally:
            cursor.close()

    def last_insert_rowid(self) -> int:
        return int(self._conn.execute("SELECT last_insert_rowid()").fetchone()[0])

    def executemany(self, sql: str, seq_of_params: Iterable[Any]) -> None:
        cursor = self._conn.cursor()
        try:
            cursor.executemany(sql, seq_of_params)
        finally:
            cursor.close()


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


def _check_schema(db: _Adapter) -> None:
    """SchemaError unless the file holds sqlq's tables, at a version this sqlq knows."""
    version = migrate.schema_version(cast(Any, db), allow_foreign=True)
    if version == 0:
        raise SchemaError("the database has no sqlq schema: open it once with "
                          "sqlq.Queue(path) (init=True to add sqlq to an existing database)")


def _check_one_sqlite(db: _Adapter) -> None:
    """Refuse a file this process also has open through sqlq.Queue (apsw's own SQLite).

    Two copies of SQLite in one process ignore each other's locks (see db.py), so
    this connection and a Queue could both write at once and corrupt the file.
    """
    for _, name, path in db.execute("PRAGMA database_list").fetchall():
        if name == "main" and path and open_through_sqlq(path):
            raise DatabaseError(
                f"{path}: this process also has a sqlq.Queue open on it; two SQLite "
                "libraries in one process ignore each other's locks. Use the Queue's "
                "transaction() here, or sqlq.put(conn) in processes without a Queue")


def run(conn: sqlite3.Connection, fn: Callable[[Any], T]) -> T:
    """Run fn(adapter) in the caller's transaction, or in one we open (see module doc);
    fn uses :data:`STORE` on the adapter."""
    if not isinstance(conn, sqlite3.Connection):
        raise TypeError(f"conn must be a sqlite3.Connection, not {type(conn).__name__}")
    if sqlite3.sqlite_version_info < MIN_SQLITE:
        raise DatabaseError(f"sqlite3 uses SQLite {sqlite3.sqlite_version}; sqlq.put needs "
                            f"{'.'.join(map(str, MIN_SQLITE))} or newer")
    db = _Adapter(conn)
    try:
        _check_one_sqlite(db)
        _check_schema(db)
        if conn.in_transaction:
            return fn(db)
        own = _autocommits(conn)
        # IMMEDIATE: take the write lock now, so the insert cannot fail half-way for
        # want of it; we can retry a BEGIN, not a caller's transaction.
        _begin_retrying(conn.execute, "BEGIN IMMEDIATE")
        try:
            result = fn(db)
            if own:
                conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")  # only our own statements are in it
            raise
        return result
    except sqlite3.Error as e:
        raise DatabaseError(f"sqlq.put: {e}") from e


__all__ = ["STORE", "run"]
