"""The connection to PostgreSQL: the only module here that calls psycopg's connect.

One connection per backend, shared by the Queue's threads under a lock (as the
SQLite file's one connection is), in autocommit: a single statement is its own
transaction, and :meth:`Database.write` opens one only for several. Driver errors
become sqlq's one-line errors naming the database, without its password.
"""

from __future__ import annotations

import contextlib
import logging
import select
import threading
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, TypeAlias, TypeVar

import psycopg
from psycopg import errors as pg_errors
from psycopg import sql

from ...errors import DatabaseError, Disconnected, Error, Locked
from ..base import Durability
from ..locations import redact
from . import migrate, pooling

T = TypeVar("T")
log = logging.getLogger("sqlq")

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


#: What a server (or PgBouncer) says when it turns a login away for a while: it is
#: starting, stopping or recovering, full, or the pooler cannot reach it yet; or the
#: new session was ended as it began ("terminating connection due to administrator
#: command": a fast shutdown, or pg_terminate_backend, reached it mid-login; "because of
#: crash of another server process"). libpq gives no SQLSTATE for a failed login, only
#: the text (English unless lc_messages says otherwise; a refusal in another language is
#: waited for, as before).
_BUSY_LOGIN = ("starting up", "shutting down", "in recovery mode", "accepting connections",
               "too many clients", "connection slots", "cannot connect to server",
               "server login has been failing", "no more connections allowed",
               "terminating connection")


#: What PgBouncer says (08P01) when the server session under a client's statement went
#: (it then ends the client's connection too) or none can be had for a while; it says
#: "transaction blocks not allowed in statement pooling mode" with the same code.
#: "invalid server parameter" is its word for any error while it SETs a client's
#: startup parameters on a server session (src/server.c), which a server going down
#: gives as it ends that session; a parameter the server really refuses is said again
#: on every try, so waiting for it ends with the same text.
_POOLER_BUSY = (*_BUSY_LOGIN, "server conn crashed", "query_wait_timeout",
                "server_login_retry", "invalid server parameter")


def _unreachable(error: psycopg.Error) -> bool:
    """Whether error says the server could not be reached or is going down or starting
    up (refused, unreachable, no answer; class 57P: shutdown, crash, starting up), not
    that it refused us (a password, a missing database, a role)."""
    if not isinstance(error, psycopg.OperationalError):
        return False
    state = error.sqlstate
    if state is None:  # a failed login: did the server answer, and with what?
        text = str(error)
        answered = "FATAL:" in text or "ERROR:" in text
        return not answered or any(busy in text for busy in _BUSY_LOGIN)
    if state == "08P01":  # PgBouncer's code for all it says: for a while only if it says so
        return any(text in str(error) for text in _POOLER_BUSY)
    return state.startswith(("57P", "08"))  # 08: the connection went


class Connection(psycopg.Connection[Any]):
    """psycopg's connection, with the ledger of the claims made on it."""

    #: The claims made on this connection (Database's, shared across its reconnects).
    ledger: ClaimLedger | None = None


#: What the store's verbs are given: sqlq's own Connection, or an application's psycopg
#: connection (``sqlq.put(conn)``, the contrib faces), which has no ledger.
PgConn: TypeAlias = psycopg.Connection[Any]


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

    @staticmethod
    def claimed(entry: list[Any] | None, ids: list[int]) -> None:
        """The claim of ``entry`` (None: not noted) took these jobs."""
        if entry is not None:
            entry[2] = ids

    def settle(self, conn: psycopg.Connection[Any] | None, lost: bool) -> None:
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
            elif conn is not None and \
                    conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE:
                for _, now, ids in self._pending:  # committed, or rolled back (ids None)
                    if ids is not None:
                        if now != self._last_now:
                            self._last_now, self._last_ids = now, []
                        self._last_ids.extend(ids)
                        for _owner, unseen_now, known in self.unseen:
                            if unseen_now == now:
                                known.extend(ids)
                self._pending.clear()

    def discard(self) -> None:
        """What is pending was rolled back (its connection lost before a COMMIT)."""
        with self._lock:
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


def connect(url: str, location: str, *, pooled: bool = False) -> Connection:
    """A new autocommit connection with sqlq's session settings; DatabaseError in one
    line if the server refuses (Disconnected if it cannot be reached). ``pooled``: the
    server session may be shared (a transaction pool, or not known yet): no prepared
    statements, no session settings (they would land on another client's session)."""
    try:
        conn = Connection.connect(url, autocommit=True, **CONNECT_OPTIONS,
                                  **({"prepare_threshold": None} if pooled else {}))
    except psycopg.Error as e:
        raise translate(location, e) from None
    if not pooled:
        with closed_on_error(conn, location):
            set_session(conn)
    return conn


def set_session(conn: Connection) -> None:
    """Set SESSION_SETTINGS on conn's own server session."""
    settings = dict(SESSION_SETTINGS)
    if conn.info.server_version >= 140000:
        settings.update(SESSION_SETTINGS_14)
    conn.execute("SELECT set_config(name, value, false) FROM unnest(%s::text[], %s::text[])"
                 " AS s(name, value)", (list(settings), list(settings.values())))


def _retryable(error: BaseException) -> bool:
    return isinstance(error, (pg_errors.SerializationFailure, pg_errors.DeadlockDetected))


#: psycopg's words for a statement answered without rows where rows were read.
_NO_ROWS = "didn't produce records"


@contextlib.contextmanager
def closed_on_error(conn: psycopg.Connection[Any], location: str, *,
                    rows_answered: bool = False) -> Iterator[None]:
    """Set a new connection up: on any error it is closed, a driver's error translated
    (a session gone at once, a restart: Disconnected).

    ``rows_answered``: every statement the block reads returns a row, so one answered
    without rows was answered for another statement: the session is out of step with
    its client, and is dropped as a lost one (Disconnected: the caller connects again).
    PgBouncer in session mode did this once under the chaos test's restarts and
    terminated sessions: a new client's ``SELECT pg_backend_pid()`` was answered with
    ``DISCARD ALL``, the reset query PgBouncer runs on a session a client gave back."""
    try:
        yield
    except psycopg.Error as e:
        error = translate(location, e, conn)
        conn.close()
        if rows_answered and isinstance(e, psycopg.ProgrammingError) and _NO_ROWS in str(e):
            error = Disconnected(f"{location}: the session answered another statement "
                                 f"({str(e).strip()}): connecting again")
        raise error from None
    except BaseException:
        conn.close()
        raise


def _dropped(conn: psycopg.Connection[Any]) -> bool:
    """Whether the server dropped this idle connection: closed, or readable with nothing
    asked (a session ended by a restart or ``pg_terminate_backend`` says so, then closes;
    sqlq's own connection listens to nothing). One ``select`` of a descriptor."""
    if conn.closed:
        return True
    ready, _, _ = select.select([conn.pgconn.socket], [], [], 0)
    return bool(ready)


#: Transaction states in which a call joins the transaction open on the connection.
_OPEN = (psycopg.pq.TransactionStatus.INTRANS, psycopg.pq.TransactionStatus.INERROR,
         psycopg.pq.TransactionStatus.ACTIVE)
class Database:
    """One connection to a sqlq database on PostgreSQL, safe to share between threads.

    The server is not needed to make one: if it cannot be reached (down, restarting,
    starting up), the connection, the pooler check and the migrations are made by the
    first call, which waits for the server as a call after a lost connection does
    (``sqlq work --import`` of a module that makes its Queue at import: F13). A server
    that refuses (a password, a missing database, a statement pool) is said at once.

    ``mode``: what stands between this process and the server (pooling.py), found at
    the first connection unless ``pooler`` (the URL's ``pooler=``) says it. Through a
    transaction pool nothing of a session is relied upon: connections are made without
    prepared statements or session settings, and each transaction sets what a session
    would keep (``SET LOCAL``: the lock wait; synchronous_commit where the server's
    default is weaker than the durability asked).

    Every call runs in :meth:`_once_more`'s rule: a connection found dropped before a
    statement is sent is made again first, and a call whose connection was lost
    before it could commit (a read; a transaction before its COMMIT) runs once more on
    a new one. Only a write cut off while it may have committed (a COMMIT, a statement
    in autocommit) raises :class:`Disconnected` (reliability.md W5).
    """

    def __init__(self, url: str, *, durability: Durability, clock: Callable[[], int],
                 pooler: str = "auto", listen_url: str | None = None,
                 grace_s: float = 5.0) -> None:
        if durability not in ("full", "normal"):
            raise ValueError(f"durability must be 'full' or 'normal', not {durability!r}")
        self.url = url
        self.location = redact(url)
        self.durability = durability
        self._clock = clock
        self._lock = threading.RLock()
        #: How many times the connection was made again: a write cut off by a lost
        #: connection may have committed unseen (see PostgresBackend.owner_token).
        self.reconnects = 0
        self.ledger = ClaimLedger()
        self._lock_timeout = "0"  # PostgreSQL's: wait for ever (set_lock_wait)
        self._migrated = False
        #: Transactions open on the connection by the thread holding the lock (nested).
        self._depth = 0
        self._conn: Connection | None = None
        self.mode: pooling.Mode | None = pooling.forced(pooler)
        self._listen_url = listen_url
        self._grace_s = grace_s  # owners.GRACE_S, for the line at open
        #: Through a transaction pool, what each transaction sets synchronous_commit to.
        self._local_sync: str | None = None
        self._described = False
        try:
            self._conn = self._open()
        except Disconnected as e:
            log.info("%s; connecting when first used", e)

    def _connect(self) -> Connection:
        mode = self.mode
        conn = connect(self.url, self.location, pooled=mode not in ("direct", "session"))
        conn.ledger = self.ledger
        if mode == "session":  # through any pooler: a transaction pool taken for a
            conn.prepare_threshold = None  # session pool would fail prepared statements
        with closed_on_error(conn, self.location, rows_answered=True):
            if mode is None:  # made as for a transaction pool until known
                mode = self.mode = pooling.detect(conn, self.url, CONNECT_OPTIONS)
                if mode == "direct":
                    conn.prepare_threshold = 5  # psycopg's default
                if mode != "transaction":
                    set_session(conn)
            if not self._described:
                self._check_pool(conn, mode)
            if mode == "transaction":
                return conn
            # normal survives any crash of a client, may lose the last commits if the
            # server's host loses power: the same promise as normal on a SQLite file.
            # full waits for the flush whatever the server's default says.
            conn.execute(
                "SELECT set_config('synchronous_commit', %s, false),"
                " set_config('lock_timeout', %s, false)",
                ("off" if self.durability == "normal" else "on", self._lock_timeout))
        return conn

    def _check_pool(self, conn: Connection, mode: pooling.Mode) -> None:
        """Once a Database, at its first connection: say what is between it and the server
        (pooling.describe). Through a transaction pool a commit follows the server's
        synchronous_commit for the role and database (no session to set it on): if that
        is off and full durability is asked, every write sets it for its transaction."""
        if mode == "transaction" and self.durability == "full":
            row = conn.execute("SELECT reset_val FROM pg_settings"
                               " WHERE name = 'synchronous_commit'").fetchone()
            if row is not None and row[0] == "off":
                self._local_sync = "on"
                log.info(
                    "%s: durability 'full' through a transaction pool, and the server's "
                    "synchronous_commit is off for this role: each write sets it on for "
                    "its own transaction (two more round trips; ALTER ROLE ... SET "
                    "synchronous_commit = on spares them)", self.location)
        pooling.describe(self.location, mode, self._listen_url, self._grace_s)
        self._described = True

    def pooled(self) -> bool:
        """Whether the server sessions are shared between clients (a transaction pool):
        connected first if the mode is not known yet."""
        if self.mode is None:
            self.connect()
        return self.mode == "transaction"

    def _open(self) -> Connection:
        """A new connection; on the first, the schema brought up to date (migrate.py) in
        one transaction."""
        conn = self._connect()
        if self._migrated:
            return conn
        with closed_on_error(conn, self.location), conn.transaction():
            migrate.migrate(conn, self._clock(), self.location)
        self._migrated = True
        return conn

    def connect(self) -> None:
        """Make the first connection now if there is none (Disconnected at once if the
        server cannot be reached)."""
        with self._lock, self._errors():
            if self._conn is None:
                self._conn = self._open()

    def set_lock_wait(self, seconds: float | None) -> None:
        """A write waiting longer than this for a row or table lock raises Locked."""
        self._lock_timeout = "0" if seconds is None else f"{max(1, round(seconds * 1000))}ms"
        with self._lock:
            if self._conn is None:
                return  # the first connection sets it
            if self.mode == "transaction":
                return  # each transaction sets it (_local_settings)
            with self._errors():
                conn = self._conn if self._inside() else self._usable()
                conn.execute("SELECT set_config('lock_timeout', %s, false)",
                             (self._lock_timeout,))

    def _local_settings(self, conn: Connection) -> None:
        """Through a transaction pool, at the start of a transaction: what a session of its
        own would keep (set_lock_wait; synchronous_commit, _check_pool)."""
        if self.mode != "transaction":
            return
        settings = {"lock_timeout": self._lock_timeout} if self._lock_timeout != "0" else {}
        if self._local_sync is not None:
            settings["synchronous_commit"] = self._local_sync
        if settings:  # SET takes no snapshot: SET TRANSACTION ISOLATION may follow
            conn.execute(sql.SQL("; ").join(
                sql.SQL("SET LOCAL {} = {}").format(sql.Identifier(name), sql.Literal(value))
                for name, value in settings.items()))

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
            self.ledger.settle(self._conn, self._conn is None or self._conn.closed)
            raise
        self.ledger.settle(self._conn, False)

    def _usable(self, give_up_at: float | None = None) -> Connection:
        """The connection, made (again) first if there is none yet or the server dropped
        it (a restart, a terminated session), waiting up to RECONNECT_FOR_S for a
        server that cannot be reached, and no later than ``give_up_at`` (monotonic
        seconds: a lease's end, after which the call would be refused anyway)."""
        conn = self._conn
        if conn is not None and not _dropped(conn):
            return conn
        if conn is not None:
            conn.close()
        deadline = time.monotonic() + RECONNECT_FOR_S
        if give_up_at is not None:
            deadline = min(deadline, give_up_at)
        delay = 0.05
        while True:
            try:
                self._conn = self._open()
                if conn is not None:
                    self.reconnects += 1
                return self._conn
            except Disconnected:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise
                time.sleep(min(delay, left))  # one more try at the deadline itself
                delay = min(delay * 2, 2.0)

    def _once_more(self, attempt: Callable[[Connection], T], committed: Callable[[], bool],
                   give_up_at: float | None = None) -> T:
        """``attempt(conn)``; if its connection is lost and ``committed()`` says it
        cannot have committed, once more on a new connection (the one place of the
        backend's rule on lost connections: see the class docstring)."""
        conn = self._usable(give_up_at)
        try:
            return attempt(conn)
        except Exception as e:
            if not conn.closed and isinstance(e, psycopg.OperationalError) and _unreachable(e):
                conn.close()  # a pooler's word that the server session went: it ends ours
            if not conn.closed or committed():
                raise
            log.info("%s: %s; running it again on a new connection", self.location,
                     str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__)
            self.ledger.discard()  # its claims were not committed
        return attempt(self._usable(give_up_at))

    def _inside(self) -> bool:
        """Whether a call now joins a transaction open on the connection (this thread's:
        others wait for the lock)."""
        if self._depth:
            return True
        conn = self._conn
        return conn is not None and conn.info.transaction_status in _OPEN

    def in_transaction(self) -> bool:
        return self._inside()

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
        """fn(conn), each statement its own snapshot; run again on a new connection if
        the one it ran on was lost (a read commits nothing)."""
        with self._lock, self._errors():
            if self._inside():
                return fn(self._conn)
            return self._once_more(fn, lambda: False)

    def write(self, fn: Callable[[Any], T], *, durable: bool = True,
              single: bool = False, give_up_at: float | None = None) -> T:
        """fn(conn) in one transaction (in autocommit when it is one statement), retried
        whole on a serialization failure or deadlock, and on a lost connection before its
        COMMIT was sent; inside transaction(), it joins. ``give_up_at``: as _usable's.

        ``durable`` is the session's: in full durability every commit waits for the
        WAL flush, claims and touches included. On a file such a write may be lost
        only with the machine, and so with its holder; here a server crash would
        undo a claim or a touch while the holder, alive elsewhere, runs the job: the
        job would be given to a second worker."""
        with self._lock, self._errors():
            if self._inside():
                return fn(self._conn)
            if single and not (self.mode == "transaction" and (
                    self._local_sync is not None or self._lock_timeout != "0")):
                # Its own commit: cut off, it may have committed.
                return fn(self._usable(give_up_at))
            committing = False

            def attempt(conn: Connection) -> T:
                nonlocal committing
                deadline = time.monotonic() + RETRY_FOR_S
                delay = 0.001
                while True:
                    committing = False
                    try:
                        self._depth += 1
                        try:
                            with conn.transaction():
                                self._local_settings(conn)
                                value = fn(conn)
                                committing = True  # COMMIT follows: lost now, in doubt
                        finally:
                            self._depth -= 1
                        return value
                    except psycopg.Error as e:
                        if not _retryable(e) or time.monotonic() >= deadline:
                            raise
                    time.sleep(delay)
                    delay = min(delay * 2, 0.25)

            return self._once_more(attempt, lambda: committing, give_up_at)

    @contextlib.contextmanager
    def transaction(self) -> Iterator[Any]:
        """A transaction the caller fills; nested use takes a savepoint (psycopg's own).
        A connection lost before the BEGIN went through is made again."""
        with self._lock, self._errors():
            if self._inside():
                conn = self._conn
                assert conn is not None
                with conn.transaction():
                    yield conn
                return
            stack = contextlib.ExitStack()
            conn = self._usable()
            try:
                stack.enter_context(conn.transaction())
            except psycopg.Error:
                if not conn.closed:
                    raise
                conn = self._usable()
                stack.enter_context(conn.transaction())
            self._depth += 1
            try:
                with stack:
                    self._local_settings(conn)
                    yield conn
            finally:
                self._depth -= 1

    def close(self) -> None:
        with self._lock:
            if self._conn is not None:
                self._conn.close()
