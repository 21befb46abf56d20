"""The PostgreSQL backend: the same sqlq on a server, for more than one host.

The same files as ``sqlite/``, each concern under the same name:

* ``db.py``: the connection in autocommit (made on first use if the server cannot be
  reached), transactions, reconnects and what runs again after a lost connection,
  retries of serialization failures, error translation; through a transaction pool,
  connections without prepared statements or session settings;
* ``migrate.py``: the schema, from the top-level ``migrations/postgres/``;
* ``store.py`` + ``queries.sql``: the verbs in PostgreSQL's dialect (claims with
  ``FOR UPDATE SKIP LOCKED``, in functions of the migrations);
* ``owners.py``: who holds reservations and who is dead: a session advisory lock
  per reserving process (none through a transaction pool: heartbeats alone), kept
  (and made again after a lost session) by a thread that also writes a sign of
  life; a waiter gives back a dead holder's jobs. No event announces a death, so
  waiters check while others hold jobs
  (:attr:`liveness_poll`);
* ``wakeup.py``: LISTEN/NOTIFY wakeups, one listening connection per process (on
  ``listen_url`` if the URL gives one; through a transaction pool without it, a poll);
* ``pooling.py``: sqlq's own URL parameters (``pooler=``, ``listen_url=``), and what
  kind of pooler stands between sqlq and the server (none, session, transaction);
* ``horizon.py``: who holds this database's xmin horizon, and the dead rows it keeps
  (:mod:`sqlq.horizon`);
* ``psycopg_put.py``: ``sqlq.put(conn)`` in the application's own psycopg transaction.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from functools import partial
from typing import Any, TypeVar, cast

from ...horizon import Horizon
from ...model import OnProgress
from ..base import Backend, Conn, Durability, Notifier
from . import pooling
from .db import Connection, Database
from .horizon import XminWatch
from .owners import GRACE_S, Owners
from .store import PostgresStore
from .wakeup import Listener, PgNotifier

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
        self._url = url  # sqlq's parameters included: a child process parses them again
        options = pooling.parse(url)
        self._listen_url = options.listen_url
        self.db = Database(options.url, durability=durability, clock=clock,
                           pooler=options.pooler, listen_url=options.listen_url,
                           grace_s=GRACE_S)
        self.location = self.db.location
        self.durability = durability
        self.store = PostgresStore()
        self.owners = Owners(options.url, self.location, self.db, self.store)
        self._xmin = XminWatch(self.store)
        self._clock = clock
        self._listener: Listener | None = None

    def read(self, fn: Callable[[Conn], T], *, single: bool = False) -> T:
        return self.db.read(fn)  # autocommit: every statement is its own snapshot

    def write(self, fn: Callable[[Conn], T], *, durable: bool = True,
              single: bool = False) -> T:
        return self.db.write(fn, durable=durable, single=single)

    def write_until(self, give_up_at: float, fn: Callable[[Conn], T], *, durable: bool = True,
                    single: bool = False) -> T:
        return self.db.write(fn, durable=durable, single=single, give_up_at=give_up_at)

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
        cursor = cast(Connection, conn).execute(sql, params or None)
        return list(cursor.fetchall()) if cursor.description else []

    def set_lock_wait(self, seconds: float | None) -> None:
        self.db.set_lock_wait(seconds)

    # -- liveness (owners.py) ----------------------------------------------------------------

    def owner_token(self) -> str:
        return self.owners.token()

    def current_owner(self) -> str | None:
        return self.owners.current()

    def dead_owners(self, tokens: Sequence[str]) -> list[str]:
        return self.owners.dead(tokens)

    def reap_owners(self, tokens: Sequence[str]) -> int:
        return self.owners.reap(tokens)

    def owner_info(self, token: str) -> tuple[str, int | None]:
        return self.owners.info(token)

    def forget_owner(self, token: str) -> None:
        pass  # release_dead_owner kept its row (its keeper may come back): an hour, then gone

    # -- operations --------------------------------------------------------------------------

    def maintain(self, progress: OnProgress | None = None) -> dict[str, Any]:
        """Vacuum the hot table and report dead rows and the oldest snapshot holding this
        database's horizon, which keeps deleted jobs from being cleaned up (docs:
        long-transactions). ``progress(steps done, fraction)`` after each of the two
        steps (the vacuum, the look)."""
        step = progress or (lambda done, fraction: None)
        # Each its own autocommit statement: VACUUM runs outside a transaction.
        report = {"db": self.location, **self.db.read(self.store.vacuum_jobs)}
        step(1, 1 / 2)
        holder = self.horizon(self._clock()).holder
        report["oldest-transaction"] = None if holder is None else (
            f"{holder.seconds:.1f} s, {holder.name} ({holder.kind}), {holder.detail}")
        step(2, 1.0)
        return report

    def horizon(self, now: int) -> Horizon:
        return self.db.read(partial(self._xmin.look, now=now))

    # -- waiting -----------------------------------------------------------------------------

    def open_notifier(self) -> Notifier:
        if self._listener is None:
            with _listeners_lock:
                listener, count = _listeners.get(self._url, (None, 0))
                if listener is None:
                    pooled = self.db.pooled()
                    listener = Listener(self._listen_url or (None if pooled else self.db.url),
                                        self.location)
                _listeners[self._url] = (listener, count + 1)
            self._listener = listener
        return PgNotifier(self._listener)

    def connect(self) -> None:
        self.db.connect()

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
            self.owners.close()
        finally:
            self.db.close()
