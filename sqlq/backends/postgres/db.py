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
from typing import TYPE_CHECKING, Any, TypeVar

import psycopg
from psycopg import errors as pg_errors

from ...errors import DatabaseError, Disconnected, Error, Locked
from ..base import Durability
from ..locations import redact
from . import migrate

T = TypeVar("T")

#: libpq options every sqlq connection uses. Keepalives and the TCP user timeout bound
#: how long this side takes to notice a vanished server (no TCP reset): about 25 s.
CONNECT_OPTIONS: dict[str, Any] = {
    # Text as str on a SQL_ASCII database too (initdb --no-locale), where psycopg would
    # return bytes; the server takes any client encoding there (issue 22, F8).
    "client_encoding": "UTF8",
    "application_name": "sqlq", "connect_timeout": 10, "keepalives": 1,
    "keepalives_idle": 10, "keepalives_interval": 5, "keepalives_count": 3,
    "tcp_user_timeout": 25_000,
}
#: What every sqlq session sets on the server, whatever the database's defaults:
#: a session is never ended for being idle (idle_session_timeout, PostgreSQL 14 and
#: later, common on managed servers: it ended holders' owner sessions while their
#: jobs ran), and the server notices a vanished client (its host gone, no TCP reset)
#: in about 25 s, so the owner lock of a dead host is not held for hours.
SESSION_SETTINGS: dict[str, str] = {
    "tcp_keepalives_idle": "10", "tcp_keepalives_interval": "5", "tcp_keepalives_count": "3",
    "tcp_user_timeout": "25000",
}
SESSION_SETTINGS_14 = {"idle_session_timeout": "0"}
#: How long a write keeps retrying a serialization failure or deadlock.
RETRY_FOR_S = 60.0
#: How long an operation keeps trying to reconnect to a server that went away.
RECONNECT_FOR_S = 60.0

def translate(location: str, error: psycopg.Error, conn: psycopg.Connection[Any] | None = None
              ) -> Error:
    """The sqlq error, with a one-line message naming the database, for a driver error;
    :class:`Disconnected` when conn's session is gone (or none could be made) for a
    reason that may pass: a restart, a terminated session, an unreachable server."""
    text = (str(error).strip().splitlines() or [type(error).__name__])[0]
    if isinstance(error, pg_errors.LockNotAvailable):
        return Locked(f"{location}: a lock was held by another session for too long ({text})")
    if conn is not None and (conn.closed or conn.broken) or _unreachable(error):
        return Disconnected(f"{location}: {text}")
    return DatabaseError(f"{location}: {text}")


def _unreachable(error: psycopg.Error) -> bool:
    """Whether error says the server could not be reached or is going down or starting
    up (no SQLSTATE: refused, unreachable; class 57P: shutdown, crash, starting up), not
    that it refused us (a password, a missing database)."""
    if not isinstance(error, psycopg.OperationalError):
        return False
    state = error.sqlstate
    return state is None or state.startswith("57P") or state == "08006"


class Connection(psycopg.Connection[Any]):
    """psycopg's connection, with the ledger of the claims made on it."""

    #: The claims made on this connection (Database's, shared across its reconnects).
    ledger: ClaimLedger | None = None


class ClaimLedger:
    """Claims whose commit this process could not see: the connection was lost while
    the claim, or the transaction holding it, was in flight. Such a claim may have
    committed, its job reserved under this process's token, which lives on (the
    owner session is kept, owners.py): no one would give that job back before its
    TTR. So the claim's (owner, now) is kept here, and :meth:`PostgresBackend.owner_token`
    gives back, before the next claim, the jobs it may have taken: those reserved by
    that owner at that time (``reserved_until - ttr = now``), except the ones a
    claim seen to commit took at the same millisecond.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pending: list[list[Any]] = []  # [owner, now, ids or None] not yet committed
        self._last_now = -1  # the time of the latest committed claim, and what it took
        self._last_ids: list[int] = []
        #: (owner, now, ids known at that time) of claims that may have committed unseen.
        self.unseen: list[tuple[str, int, list[int]]] = []

    def claiming(self, owner: str | None, now: int) -> list[Any] | None:
        """A claim is about to run; its entry, for :meth:`claimed`."""
        if owner is None:
            return None  # a detached claim (reserve(detach=True)): its job has no owner
        entry = [owner, now, None]
        with self._lock:
            self._pending.append(entry)
        return entry

    def claimed(self, entry: list[Any] | None, ids: list[int]) -> None:
        if entry is not None:
            entry[2] = ids

    def settle(self, conn: psycopg.Connection[Any], lost: bool) -> None:
        """After a statement or transaction: what is pending committed (the connection
        is idle), was rolled back (an error left it idle), or may have committed (lost)."""
        if not self._pending:  # the common case, read without the lock
            return
        with self._lock:
            if not self._pending:
                return
            if lost:
                for owner, now, _ in self._pending:
                    known = self._last_ids if now == self._last_now else []
                    self.unseen.append((owner, now, list(known)))
                self._pending.clear()
            elif conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE:
                for _, now, ids in self._pending:  # committed, or rolled back (ids None)
                    if ids is not None:
                        if now != self._last_now:
                            self._last_now, self._last_ids = now, []
                        self._last_ids.extend(ids)
                        for _owner, unseen_now, known in self.unseen:
                            if unseen_now == now:
                                known.extend(ids)
                self._pending.clear()

    def take_unseen(self) -> list[tuple[str, int, list[int]]]:
        with self._lock:
            unseen, self.unseen = self.unseen, []
            return unseen

    def put_back(self, unseen: list[tuple[str, int, list[int]]]) -> None:
        with self._lock:
            self.unseen[:0] = unseen


if TYPE_CHECKING:
    from ..base import Conn

    def _connection_is_a_conn(c: psycopg.Connection[Any]) -> Conn:
        """mypy's proof that a psycopg connection offers what base.Conn says."""
        return c


def connect(url: str, location: str) -> Connection:
    """A new autocommit connection with sqlq's session settings; DatabaseError in one
    line if the server refuses (Disconnected if it cannot be reached)."""
    try:
        conn = Connection.connect(url, autocommit=True, **CONNECT_OPTIONS)
    except psycopg.Error as e:
        raise translate(location, e) from None
    settings = dict(SESSION_SETTINGS)
    if conn.info.server_version >= 140000:
        settings.update(SESSION_SETTINGS_14)
    try:
        conn.execute("SELECT set_config(name, value, false) FROM unnest(%s::text[], %s::text[])"
                     " AS s(name, value)", (list(settings), list(settings.values())))
    except psycopg.Error as e:
        error = translate(location, e, conn)
        conn.close()
        raise error from None
    return conn


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
        self.ledger = ClaimLedger()
        self._lock_timeout = "0"  # PostgreSQL's: wait for ever (set_lock_wait)
        self._conn: Connection = self._connect()
        try:
            self._migrate(clock())
        except BaseException:
            self._conn.close()
            raise

    def _connect(self) -> Connection:
        conn = connect(self.url, self.location)
        conn.ledger = self.ledger
        # normal survives any crash of a client, may lose the last commits if the
        # server's host loses power: the same promise as normal on a SQLite file. full
        # waits for the flush whatever the server's default says.
        try:
            conn.execute("SELECT set_config('synchronous_commit', %s, false),"
                         " set_config('lock_timeout', %s, false)",
                         ("off" if self.durability == "normal" else "on", self._lock_timeout))
        except psycopg.Error as e:  # the session went at once (a restart): Disconnected
            error = translate(self.location, e, conn)
            conn.close()
            raise error from None
        return conn

    def set_lock_wait(self, seconds: float | None) -> None:
        """A write waiting longer than this for a row or table lock raises Locked."""
        self._lock_timeout = "0" if seconds is None else f"{max(1, round(seconds * 1000))}ms"
        with self._lock, self._errors():
            self._usable().execute("SELECT set_config('lock_timeout', %s, false)",
                                   (self._lock_timeout,))

    def _migrate(self, now_ms: int) -> None:
        """Bring the schema up to date in one transaction (migrate.py)."""
        with self._errors(), self._conn.transaction():
            migrate.migrate(self._conn, now_ms, self.location)

    @contextlib.contextmanager
    def _errors(self) -> Iterator[None]:
        """Driver errors as sqlq's; and where the claims made inside stand (ClaimLedger)."""
        try:
            yield
        except psycopg.Error as e:
            error = translate(self.location, e, self._conn)
            self.ledger.settle(self._conn, isinstance(error, Disconnected))
            raise error from e
        except BaseException:
            self.ledger.settle(self._conn, self._conn.closed or self._conn.broken)
            raise
        self.ledger.settle(self._conn, False)

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
            except Disconnected:
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

        ``durable`` is the session's: in full durability every commit waits for the
        WAL flush, claims and touches included. On a file such a write may be lost
        only with the machine, and so with its holder; here a server crash would
        undo a claim or a touch while the holder, alive elsewhere, runs the job: the
        job would be given to a second worker."""
        with self._lock, self._errors():
            conn = self._usable()
            if self.in_transaction():
                return fn(conn)
            if single:
                return fn(conn)
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
