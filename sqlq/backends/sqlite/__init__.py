"""The SQLite backend: one WAL-mode file, apsw's bundled SQLite, inotify wakeups.

* ``db.py``: the connection (the only apsw user here), pragmas, busy handling,
  transactions, error translation; ``migrate.py`` and ``migrations/``: the schema;
* ``store.py`` + ``queries.sql``: the verbs in SQLite's dialect;
* ``owners.py``: liveness of reservation holders, by ``flock``'ed files beside the
  database (the kernel releases them when a process dies);
* ``wakeup.py``: inotify on the database directory, or polling where there is none;
* ``sqlite3_put.py``: ``sqlq.put(conn)`` through Python's own ``sqlite3`` module.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from typing import Any, TypeVar

from ..base import Backend, Conn, Durability, Notifier
from . import owners
from .db import Database
from .store import SQLiteStore
from .wakeup import make_notifier

T = TypeVar("T")


class SQLiteBackend(Backend):
    """A sqlq database in one SQLite file (see :class:`sqlq.Queue` for the arguments)."""

    def __init__(self, path: str, *, durability: Durability = "full", init: bool = False,
                 clock: Callable[[], int], vfs: str | None = None) -> None:
        self.location = os.path.abspath(path)
        self._path = path  # as given: what SQLite opens, and messages name
        self.db = Database(path, durability=durability, init=init, clock=clock, vfs=vfs)
        self.durability = self.db.durability
        self.store = SQLiteStore()
        self._owner: owners.Owner | None = None
        self._owner_lock = threading.Lock()

    def read(self, fn: Callable[[Conn], T]) -> T:
        return self.db.read(fn)

    def write(self, fn: Callable[[Conn], T], *, durable: bool = True,
              single: bool = False) -> T:
        return self.db.write(fn, durable=durable, single=single)

    def transaction(self) -> AbstractContextManager[Conn]:
        return self.db.transaction()

    def execute_app(self, conn: Conn, sql: str, params: Sequence[Any] | dict[str, Any] = ()
                ) -> list[tuple[Any, ...]]:
        return list(conn.execute(sql, params))

    def set_lock_wait(self, seconds: float | None) -> None:
        self.db.lock_wait = seconds

    def owner_token(self) -> str:
        with self._owner_lock:
            if self._owner is None:
                self._owner = owners.Owner(self._path)
            return self._owner.token

    def current_owner(self) -> str | None:
        return None if self._owner is None else self._owner.token

    def dead_owners(self, tokens: Sequence[str]) -> list[str]:
        return [token for token in tokens if not owners.is_alive(self._path, token)]

    def owner_info(self, token: str) -> tuple[str, int | None]:
        pid = token.split("-", 1)[0]  # owners.Owner: "<pid>-<random>", on this host
        return os.uname().nodename, int(pid) if pid.isdigit() else None

    def forget_owner(self, token: str) -> None:
        owners.forget(self._path, token)

    def maintain(self) -> dict[str, Any]:
        """Checkpoint the WAL into the file (and truncate it), check the file, and report
        its size: deleted jobs' pages are reused, so the file stays bounded under churn."""
        def look(c: Conn) -> dict[str, Any]:
            busy, wal_frames, moved = c.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
            c.execute("PRAGMA optimize")
            return {
                "checkpoint": "done" if not busy else "partial (readers were active)",
                "wal-frames-checkpointed": moved,
                "page-size": c.execute("PRAGMA page_size").fetchone()[0],
                "pages": c.execute("PRAGMA page_count").fetchone()[0],
                "free-pages": c.execute("PRAGMA freelist_count").fetchone()[0],
                "quick-check": c.execute("PRAGMA quick_check").fetchone()[0],
            }

        return {"db": self.location, **self.db.outside_transaction(look)}

    def open_notifier(self) -> Notifier:
        return make_notifier(self._path, owners.ensure_dir(self._path))

    def close(self) -> None:
        try:
            if self._owner is not None:
                self._owner.close()
        finally:
            self.db.close()
