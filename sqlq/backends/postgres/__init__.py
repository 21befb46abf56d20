"""The PostgreSQL backend: the same sqlq on a server, for more than one host.

* ``db.py``: the connection, transactions, reconnects, error translation and the
  migrations in ``migrations/``;
* ``store.py`` + ``queries.sql``: the verbs in PostgreSQL's dialect (claims with
  ``FOR UPDATE SKIP LOCKED``);
* ``listen.py``: LISTEN/NOTIFY wakeups, one listening connection per process;
* ``psycopg_put.py``: ``sqlq.put(conn)`` in the application's own psycopg transaction.

* ``liveness.py``: who holds reservations and who is dead: a session advisory lock
  per reserving process, kept (and made again after a lost session) by a thread
  that also writes a sign of life; a waiter gives back a dead holder's jobs. No
  event announces a death, so waiters check while others hold jobs
  (:attr:`liveness_poll`).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from typing import Any, TypeVar

from ..base import Backend, Conn, Durability, Notifier
from .db import Database
from .listen import Listener, PgNotifier
from .liveness import GRACE_S, Holder, judge, place
from .store import PostgresStore

T = TypeVar("T")

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
        self._holder: Holder | None = None
        self._place = place()
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

    # -- liveness (liveness.py) --------------------------------------------------------------

    def owner_token(self) -> str:
        holder = self._holder
        if holder is None:
            with self._owner_lock:
                holder = self._holder
                if holder is None:
                    holder = self._holder = Holder(self._url, self.location, self.store)
        token = holder.token_now()
        if self.db.ledger.unseen:
            self._release_unseen_claims()
        return token

    def _release_unseen_claims(self) -> None:
        """Give back what claims cut off by a lost connection may have taken (ClaimLedger),
        before this process claims again."""
        unseen = self.db.ledger.take_unseen()
        try:
            self.db.write(lambda c: sum(self.store.release_unseen_claim(c, owner, now, known)
                                        for owner, now, known in unseen), durable=False)
        except BaseException:
            self.db.ledger.put_back(unseen)
            raise

    def current_owner(self) -> str | None:
        return None if self._holder is None else self._holder.token

    def _judge(self, tokens: Sequence[str]) -> list[tuple[str, bool]]:
        rows = self.db.read(lambda c: self.store.dead_owners(c, tokens, GRACE_S))
        return judge(rows, self._place)

    def dead_owners(self, tokens: Sequence[str]) -> list[str]:
        return [token for token, _ in self._judge(tokens)]

    def reap_owners(self, tokens: Sequence[str]) -> int:
        dead = self._judge(tokens)
        if not dead:
            return 0
        return self.db.write(lambda c: sum(
            self.store.release_dead_owner(c, token, gone, GRACE_S) for token, gone in dead),
            durable=False)

    def owner_info(self, token: str) -> tuple[str, int | None]:
        host, _, rest = token.rpartition("-")[0].rpartition("-")  # "<host>-<pid>-<random>"
        return (host, int(rest)) if rest.isdigit() else (token, None)

    def forget_owner(self, token: str) -> None:
        pass  # release_dead_owner deleted its row with its jobs' hand-over

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
            if self._holder is not None:
                self._holder.close()
                self._holder = None
        finally:
            self.db.close()
