"""The SQLite backend: one WAL-mode file, through apsw (the default) or Python's sqlite3;
inotify wakeups.

The same files as ``postgres/``, each concern under the same name, and two of its own:

* ``db.py``: the connection, pragmas, busy handling, transactions, error
  translation;
* ``migrate.py``: the schema, from the top-level ``migrations/sqlite/``;
* ``store.py`` + ``queries.sql``: the verbs in SQLite's dialect (``sqlq maintain``'s
  checkpoint and checks included);
* ``owners.py``: liveness of reservation holders, by ``flock``'ed files beside the
  database (the kernel releases them when a process dies);
* ``wakeup.py``: inotify on the database directory, or polling where there is none
  (``inotify.py``: the kernel's three calls, through ctypes);
* ``horizon.py``: the -wal file's size and checkpoint starvation (:mod:`sqlq.horizon`);
* ``sqlite3_put.py``: ``sqlq.put(conn)`` through Python's own ``sqlite3`` module;
* ``drivers.py`` (SQLite only): the library it goes through, apsw (the only apsw
  user here, the default) or Python's ``sqlite3`` (``driver="sqlite3"``), and
  ``immediate(conn)``, the write transaction of every hand-written BEGIN;
* ``sidecar.py`` (SQLite only): the ``<db>-sqlq/`` directory the owner files live in,
  beside the database's real path, and the checks that no other user can write in it.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from functools import partial
from typing import TYPE_CHECKING, Any, TypeVar

from ..base import Backend, Conn, Durability, Notifier
from . import sidecar
from .db import Database
from .horizon import WalWatch
from .owners import Owners
from .store import SQLiteStore
from .wakeup import make_notifier

if TYPE_CHECKING:
    from ...horizon import Horizon
    from ...model import OnProgress

T = TypeVar("T")

#: Free pages below which a file keeps them (2 MB at the 2 KiB pages of a file sqlq made,
#: 4 MB at 4 KiB): reused by the next jobs.
RECLAIM_FROM = 1024


class SQLiteBackend(Backend):
    """A sqlq database in one SQLite file (see :class:`sqlq.Queue` for the arguments)."""

    store: SQLiteStore
    statement_atomic = True

    def __init__(self, path: str, *, durability: Durability = "full", init: bool = False,
                 clock: Callable[[], int], vfs: str | None = None,
                 driver: str | None = None) -> None:
        super().__init__()
        self.location = os.path.abspath(path)
        self._path = path  # as given: what SQLite opens, and messages name
        self.db = Database(path, durability=durability, init=init, clock=clock, vfs=vfs,
                           driver=driver)
        self.durability = self.db.durability
        # The database's own read and write, a call less on every verb and group commit.
        self.read = self.db.read  # type: ignore[method-assign]
        self.write = self.db.write  # type: ignore[method-assign]
        self.store = SQLiteStore()
        self.db.began, self.db.committed = self.store.due.begin, self.store.due.commit
        self.owners = Owners(path, self.db, self.store, clock)
        # Asked on every reserve and touch: the owners' own call, a call less.
        self.owner_token = self.owners.token  # type: ignore[method-assign]
        self._wal = WalWatch(self.db, self.store)

    def read(self, fn: Callable[[Conn], T], *, single: bool = False) -> T:
        return self.db.read(fn, single=single)

    def write(self, fn: Callable[[Conn], T], *, durable: bool = True,
              single: bool = False) -> T:
        return self.db.write(fn, durable=durable, single=single)

    def transaction(self, durable: bool = True) -> AbstractContextManager[Conn]:
        return self.db.transaction(durable)

    def in_transaction(self) -> bool:
        return self.db.in_transaction()

    def execute_app(self, conn: Conn, sql: str, params: Sequence[Any] | dict[str, Any] = ()
                ) -> list[tuple[Any, ...]]:
        self.store.due.forget()  # the application's SQL may write jobs the store cannot see
        return list(conn.execute(sql, params))

    def set_lock_wait(self, seconds: float | None) -> None:
        self.db.lock_wait = seconds

    # -- liveness (owners.py) ----------------------------------------------------------------

    def owner_token(self) -> str:
        return self.owners.token()

    def current_owner(self) -> str | None:
        return self.owners.current()

    def dead_owners(self, tokens: Sequence[str]) -> list[str]:
        return self.owners.dead(tokens)

    def live_owners(self, tokens: Sequence[str]) -> list[str]:
        return self.owners.alive(tokens)

    def owner_info(self, token: str) -> tuple[str, int | None]:
        return self.owners.info(token)

    def forget_owner(self, token: str) -> None:
        self.owners.forget(token)

    # -- operations --------------------------------------------------------------------------

    def maintain(self, progress: OnProgress | None = None) -> dict[str, Any]:
        """Refresh the planner's statistics, checkpoint the WAL into the file (and
        truncate it), check the file, and report its size: deleted jobs' pages are
        reused, so the file stays bounded under churn. The checkpoint comes after
        ``PRAGMA optimize``, which may write (an ANALYZE of the finished records): the
        WAL is left empty. ``progress(steps done, fraction)`` after each of the three
        steps."""
        step = progress or (lambda done, fraction: None)
        return {"db": self.location,
                **self.db.outside_transaction(partial(self.store.maintain, step=step))}

    def reclaim(self, stop: float | None = None) -> int:
        """``PRAGMA incremental_vacuum`` 500 pages a write, while a quarter of the file or
        more (and at least :data:`RECLAIM_FROM` pages) is free: after a big drain, the
        file shrinks back; under churn, the free pages stay for the next jobs. A file made
        before migration 0004 (auto_vacuum NONE) is left as it is."""
        import time

        some = partial(self.store.reclaim_some, from_pages=RECLAIM_FROM)
        done = 0
        while (n := self.db.write(some, durable=False)):
            done += n
            if stop is not None and time.monotonic() > stop:
                break
        return done

    def horizon(self, now: int) -> Horizon:
        return self._wal.look(now)

    def snapshot_into(self, path: str, progress: OnProgress | None = None) -> bool:
        """``VACUUM INTO`` path: one read transaction's view of the file, compact, through
        either driver; writers are not held up (a WAL reader blocks no one). Measured
        against the online backup API in docs/operations.md#backups. One statement, so
        its progress is the copy's size, looked at ten times a second from a thread,
        against the pages in use (``used_bytes``)."""
        store = self.store
        query = store.Q["vacuum_into"]
        if progress is None:
            self.db.outside_transaction(lambda c: c.execute(query, {"path": path}).fetchall())
            return True
        used = self.db.outside_transaction(
            lambda c: c.execute(store.Q["used_bytes"]).fetchall())[0][0]
        stop = threading.Event()

        def watch() -> None:
            while not stop.wait(0.1):
                with contextlib.suppress(OSError):
                    size = os.path.getsize(path)
                    progress(size, min(size / max(used, 1), 1.0))

        watcher = threading.Thread(target=watch, name="sqlq-backup-progress", daemon=True)
        watcher.start()
        try:
            self.db.outside_transaction(lambda c: c.execute(query, {"path": path}).fetchall())
        finally:
            stop.set()
            watcher.join()
        size = os.path.getsize(path)
        progress(size, 1.0)
        return True

    def check_integrity(self) -> str | None:
        store = self.store
        query = store.Q["integrity_check"]
        return str(self.db.outside_transaction(lambda c: c.execute(query).fetchall())[0][0])

    def open_notifier(self) -> Notifier:
        real = self.db.real_path
        return make_notifier(real, sidecar.ensure(self._path, real), self.db.check_wal)

    def close(self) -> None:
        try:
            self.owners.close()
        finally:
            self.db.close()
