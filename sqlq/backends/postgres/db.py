"""The connection to PostgreSQL: the only module here that calls psycopg's connect.

One connection per backend, shared by the Queue's threads under a lock (as the
SQLite file's one connection is), in autocommit: a single statement is its own
transaction, and :meth:`Database.write` opens one only for several. Driver errors
become sqlq's one-line errors naming the database, without its password.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import urlsplit, urlunsplit

import psycopg
from psycopg import errors as pg_errors

from ...errors import DatabaseError, Error, Locked, SchemaError
from ..base import Durability
from ..migrations import load

T = TypeVar("T")

#: libpq options every sqlq connection uses. Keepalives bound how long a vanished
#: host (no TCP reset) keeps its session, and so its owner lock: about 25 s.
CONNECT_OPTIONS: dict[str, Any] = {
    # Text as str on a SQL_ASCII database too (initdb --no-locale), where psycopg would
    # return bytes; the server takes any client encoding there (issue 22, F8).
    "client_encoding": "UTF8",
    "application_name": "sqlq", "connect_timeout": 10, "keepalives": 1,
    "keepalives_idle": 10, "keepalives_interval": 5, "keepalives_count": 3,
}
#: How long a write keeps retrying a serialization failure or deadlock.
RETRY_FOR_S = 60.0
#: How long an operation keeps trying to reconnect to a server that went away.
RECONNECT_FOR_S = 60.0

MIGRATIONS = load(Path(__file__).resolve().parent / "migrations")
LATEST = len(MIGRATIONS)

_CREATE_VERSION_TABLE = """
CREATE TABLE IF NOT EXISTS sqlq_schema (
    version    integer PRIMARY KEY,
    name       text    NOT NULL,
    applied_at bigint  NOT NULL
)"""


def redact(url: str) -> str:
    """The URL without its password, for messages and logs."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    netloc = parts.netloc.rsplit("@", 1)[1]
    user = parts.username or ""
    return urlunsplit(parts._replace(netloc=f"{user}:***@{netloc}" if user else netloc))


def translate(location: str, error: psycopg.Error) -> Error:
    """The sqlq error, with a one-line message naming the database, for a driver error."""
    text = (str(error).strip().splitlines() or [type(error).__name__])[0]
    if isinstance(error, pg_errors.LockNotAvailable):
        return Locked(f"{location}: a lock was held by another session for too long ({text})")
    return DatabaseError(f"{location}: {text}")


class Connection(psycopg.Connection[Any]):
    """psycopg's connection, telling the statements that can make use of it whether the
    one now running is a transaction of its own whose commit need not wait for the WAL
    flush (:meth:`Database.write` with ``durable=False, single=True``, full durability):
    such a statement sets ``synchronous_commit`` off for its own transaction, which
    costs nothing, where a session SET before and after it costs two round trips."""

    lazy_commit = False


def lazy_commit(conn: Any) -> bool:
    """Whether the statement about to run on conn may commit without waiting for the
    WAL flush (False on any connection sqlq did not open: the application's own)."""
    return isinstance(conn, Connection) and conn.lazy_commit


def connect(url: str, location: str) -> Connection:
    """A new autocommit connection; DatabaseError in one line if the server refuses."""
    try:
        return Connection.connect(url, autocommit=True, **CONNECT_OPTIONS)
    except psycopg.Error as e:
        raise translate(location, e) from None


def _retryable(error: BaseException) -> bool:
    return isinstance(error, (pg_errors.SerializationFailure, pg_errors.DeadlockDetected))


class Database:
    """One connection to a sqlq database on PostgreSQL, safe to share between threads."""

    def __init__(self, url: str, *, durability: Durability, clock: Callable[[], int]) -> None:
        if durability not in ("full", "normal"):
            raise ValueError(f"durability must be 'full' or 'normal', not {durability!r}")
        self.url = url
        self.location = redact(url)
        self.durability = durability
        self._lock = threading.RLock()
        #: How many times the connection was made again: a write cut off by a lost
        #: connection may have committed unseen (see PostgresBackend.owner_token).
        self.reconnects = 0
        self._lock_timeout = "0"  # PostgreSQL's: wait for ever (set_lock_wait)
        self._conn: Connection = self._connect()
        try:
            self._migrate(clock())
        except BaseException:
            self._conn.close()
            raise

    def _connect(self) -> Connection:
        conn = connect(self.url, self.location)
        # normal survives any crash of a client, may lose the last commits if the
        # server's host loses power: the same promise as normal on a SQLite file. full
        # waits for the flush whatever the server's default says.
        conn.execute("SELECT set_config('synchronous_commit', %s, false),"
                     " set_config('lock_timeout', %s, false)",
                     ("off" if self.durability == "normal" else "on", self._lock_timeout))
        return conn

    def set_lock_wait(self, seconds: float | None) -> None:
        """A write waiting longer than this for a row or table lock raises Locked."""
        self._lock_timeout = "0" if seconds is None else f"{max(1, round(seconds * 1000))}ms"
        with self._lock, self._errors():
            self._usable().execute("SELECT set_config('lock_timeout', %s, false)",
                                   (self._lock_timeout,))

    def _migrate(self, now_ms: int) -> None:
        """Bring the schema up to date in one transaction, one migrator at a time."""
        with self._errors(), self._conn.transaction():
            conn = self._conn
            conn.execute("SELECT pg_advisory_xact_lock(hashtextextended('sqlq migrate', 0))")
            conn.execute(_CREATE_VERSION_TABLE)
            row = conn.execute("SELECT coalesce(max(version), 0) FROM sqlq_schema").fetchone()
            current = int(row[0]) if row else 0
            if current > LATEST:
                raise SchemaError(f"{self.location}: it was written by a newer sqlq (schema "
                                  f"{current}, this sqlq knows {LATEST}); upgrade sqlq")
            for migration in MIGRATIONS:
                if migration.version > current:
                    conn.execute(migration.sql)  # DDL only: no parameters, several statements
                    conn.execute(
                        "INSERT INTO sqlq_schema (version, name, applied_at) "
                        "VALUES (%s, %s, %s)", (migration.version, migration.name, now_ms))

    @contextlib.contextmanager
    def _errors(self) -> Iterator[None]:
        try:
            yield
        except psycopg.Error as e:
            raise translate(self.location, e) from e

    def _usable(self) -> Connection:
        """The connection, reconnected first if the server dropped it (a restart):
        what failed is reported once; the next call finds a new session."""
        conn = self._conn
        if not (conn.closed or conn.broken):
            return conn
        deadline = time.monotonic() + RECONNECT_FOR_S
        delay = 0.05
        while True:
            try:
                self._conn = self._connect()
                self.reconnects += 1
                return self._conn
            except DatabaseError:
                if time.monotonic() >= deadline:
                    raise
                time.sleep(delay)
                delay = min(delay * 2, 2.0)

    def in_transaction(self) -> bool:
        return self._conn.info.transaction_status != psycopg.pq.TransactionStatus.IDLE

    def held_transaction(self) -> bool:
        """Whether this thread holds the connection inside a transaction."""
        # The lock is reentrant: taken at once by its holder, or by anyone when free
        # (and then no transaction is open); refused only while another thread has it.
        if not self._lock.acquire(blocking=False):
            return False
        try:
            return self.in_transaction()
        finally:
            self._lock.release()

    def read(self, fn: Callable[[Any], T]) -> T:
        with self._lock, self._errors():
            return fn(self._usable())

    def write(self, fn: Callable[[Any], T], *, durable: bool = True,
              single: bool = False) -> T:
        """fn(conn) in one transaction (in autocommit when it is one statement), retried
        whole on a serialization failure or deadlock; inside transaction(), it joins.

        ``durable=False``: the commit may be lost on power loss. In full durability
        the session keeps ``synchronous_commit`` on, and a one-statement write (a claim)
        that can, turns it off for its own transaction (:class:`Connection`); any other
        write commits durably, which costs a WAL flush but never a round trip."""
        with self._lock, self._errors():
            conn = self._usable()
            if self.in_transaction():
                return fn(conn)
            if single:
                conn.lazy_commit = not durable and self.durability == "full"
                try:
                    return fn(conn)
                finally:
                    conn.lazy_commit = False
            deadline = time.monotonic() + RETRY_FOR_S
            delay = 0.001
            while True:
                try:
                    with conn.transaction():
                        return fn(conn)
                except psycopg.Error as e:
                    if not _retryable(e) or time.monotonic() >= deadline:
                        raise
                time.sleep(delay)
                delay = min(delay * 2, 0.25)

    @contextlib.contextmanager
    def transaction(self) -> Iterator[Any]:
        """A transaction the caller fills; nested use takes a savepoint (psycopg's own)."""
        with self._lock, self._errors():
            conn = self._conn if self.in_transaction() else self._usable()
            with conn.transaction():
                yield conn

    def close(self) -> None:
        with self._lock:
            self._conn.close()
