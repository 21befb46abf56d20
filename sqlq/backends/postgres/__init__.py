"""The PostgreSQL backend: the same sqlq on a server, for more than one host.

* ``db.py``: the connection, transactions, reconnects, error translation and the
  migrations in ``migrations/``;
* ``store.py`` + ``queries.sql``: the verbs in PostgreSQL's dialect (claims with
  ``FOR UPDATE SKIP LOCKED``);
* ``listen.py``: LISTEN/NOTIFY wakeups, one listening connection per process;
* ``psycopg_put.py``: ``sqlq.put(conn)`` in the application's own psycopg transaction.

Liveness of reservation holders: each reserving process holds a session advisory
lock on a connection of its own; the server drops it the moment that session
ends (a SIGKILL, a crash, a vanished host once TCP keepalives give up), and a
waiter that can take a holder's lock gives its jobs back. No event announces
a death, so waiters check while others hold jobs (:attr:`liveness_poll`).
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from typing import Any, TypeVar

from ..base import Backend, Conn, Durability, Notifier
from .db import Database, connect
from .listen import Listener, PgNotifier
from .store import PostgresStore

T = TypeVar("T")

#: How often the owner session is checked (and re-locked after a server restart).
OWNER_CHECK_S = 1.0

_listeners: dict[str, tuple[Listener, int]] = {}
_listeners_lock = threading.Lock()


class PostgresBackend(Backend):
    """A sqlq database on a PostgreSQL server (``postgresql://user:pw@host/db``)."""

    liveness_poll = 0.5
    store: PostgresStore

    def __init__(self, url: str, *, durability: Durability = "full", init: bool = False,
                 clock: Callable[[], int]) -> None:
        super().__init__()
        self._url = url
        self.db = Database(url, durability=durability, clock=clock)
        self.location = self.db.location
        self.durability = durability
        self.store = PostgresStore()
        self._owner_lock = threading.Lock()
        self._owner: str | None = None
        self._owner_conn: Any = None
        self._owner_checked = 0.0
        self._owner_epoch = 0  # db.reconnects when the token was locked
        self._listener: Listener | None = None

    def read(self, fn: Callable[[Conn], T], *, single: bool = False) -> T:
        return self.db.read(fn)  # autocommit: every statement is its own snapshot

    def write(self, fn: Callable[[Conn], T], *, durable: bool = True,
              single: bool = False) -> T:
        return self.db.write(fn, durable=durable, single=single)

    def transaction(self, durable: bool = True) -> AbstractContextManager[Conn]:
        return self.db.transaction()  # as write(): durability is the connection's setting

    @property
    def commits_are_costly(self) -> bool:
        # With synchronous_commit off (normal) a commit waits for no WAL flush: a group's
        # BEGIN and COMMIT, two more round trips, and its hand-overs between threads
        # cost more than they save (measured: bench/bench_threads.py).
        return self.durability == "full"

    def in_transaction(self) -> bool:
        return self.db.held_transaction()

    def execute_app(self, conn: Conn, sql: str, params: Sequence[Any] | dict[str, Any] = ()
                    ) -> list[tuple[Any, ...]]:
        cursor = conn.execute(sql, params or None)
        return list(cursor.fetchall()) if cursor.description else []

    def set_lock_wait(self, seconds: float | None) -> None:
        self.db.set_lock_wait(seconds)

    # -- liveness ----------------------------------------------------------------------------

    def owner_token(self) -> str:
        with self._owner_lock:
            now = time.monotonic()
            if self._owner_conn is None or self.db.reconnects != self._owner_epoch \
                    or now - self._owner_checked >= OWNER_CHECK_S:
                self._hold_owner_lock()
                self._owner_checked = now
            assert self._owner is not None
            return self._owner

    def _hold_owner_lock(self) -> None:
        """Hold this process's token's lock on a session of its own.

        After any lost connection the process takes a new token. A claim cut off by
        the loss may have committed without our knowing its job; under the old token,
        given up here (or gone with its session), such a job is a dead holder's, and
        the next reserve anywhere, ours included, gives it back. Jobs we do know of
        may be given back too: their verbs then raise JobLost, and they run again.
        """
        conn = self._owner_conn
        alive = conn is not None and not (conn.closed or conn.broken)
        if alive:
            try:
                conn.execute("SELECT 1").fetchall()
            except Exception:  # noqa: BLE001 - any failure: the session is gone
                alive = False
        if alive and self._owner is not None and self.db.reconnects == self._owner_epoch:
            return
        epoch = self.db.reconnects
        if alive and self._owner is not None:
            self.store.unlock_owner(conn, self._owner)
        elif conn is not None:
            conn.close()
            conn = None
        if conn is None:
            conn = connect(self._url, self.location)
        token = f"{os.uname().nodename}-{os.getpid()}-{os.urandom(6).hex()}"
        self.store.lock_owner(conn, token)
        self._owner, self._owner_conn, self._owner_epoch = token, conn, epoch

    def current_owner(self) -> str | None:
        return self._owner if self._owner_conn is not None else None

    def dead_owners(self, tokens: Sequence[str]) -> list[str]:
        return self.db.read(lambda c: self.store.dead_owners(c, tokens))

    def owner_info(self, token: str) -> tuple[str, int | None]:
        host, _, rest = token.rpartition("-")[0].rpartition("-")  # "<host>-<pid>-<random>"
        return (host, int(rest)) if rest.isdigit() else (token, None)

    def forget_owner(self, token: str) -> None:
        pass  # nothing is left of it: the lock went with its session

    # -- operations --------------------------------------------------------------------------

    def maintain(self) -> dict[str, Any]:
        """Vacuum the hot table and report dead rows and the oldest open transaction,
        whose snapshot keeps deleted jobs from being cleaned up (docs: operations)."""
        store = self.store

        def look(c: Conn) -> dict[str, Any]:
            c.execute(store.Q["vacuum_jobs"])  # autocommit: VACUUM runs outside a transaction
            report: dict[str, Any] = {"db": self.location}
            for table, live, dead, vacuumed in c.execute(store.Q["table_health"]):
                report[f"{table}-rows"] = live
                report[f"{table}-dead-rows"] = dead
                report[f"{table}-vacuumed-at"] = vacuumed
            oldest = c.execute(store.Q["oldest_transaction"]).fetchone()
            if oldest is None:
                report["oldest-transaction"] = None
            else:
                pid, database, seconds, state, query = oldest
                report["oldest-transaction"] = (f"{seconds:.1f} s, pid {pid} on {database}, "
                                                f"{state}: {query.decode(errors='replace')}")
            return report

        return self.db.read(look)

    # -- waiting -----------------------------------------------------------------------------

    def open_notifier(self) -> Notifier:
        if self._listener is None:
            with _listeners_lock:
                listener, count = _listeners.get(self._url, (None, 0))
                if listener is None:
                    listener = Listener(self._url, self.location)
                _listeners[self._url] = (listener, count + 1)
            self._listener = listener
        return PgNotifier(self._listener)

    def child_location(self) -> str:
        return self._url

    def close(self) -> None:
        try:
            if self._listener is not None:
                with _listeners_lock:
                    listener, count = _listeners[self._url]
                    if count > 1:
                        _listeners[self._url] = (listener, count - 1)
                    else:
                        del _listeners[self._url]
                        listener.stop()
                self._listener = None
            if self._owner_conn is not None:
                self._owner_conn.close()
                self._owner_conn = None
        finally:
            self.db.close()
