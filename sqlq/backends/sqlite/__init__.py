"""The SQLite backend: one WAL-mode file, through apsw (the default) or Python's sqlite3;
inotify wakeups.

* ``db.py``: the connection, pragmas, busy handling, transactions, error
  translation; ``drivers.py``: the library it goes through, apsw (the only
  apsw user here, the default) or Python's ``sqlite3`` (``driver="sqlite3"``);
  ``migrate.py`` and ``migrations/``: the schema;
* ``store.py`` + ``queries.sql``: the verbs in SQLite's dialect;
* ``owners.py``: liveness of reservation holders, by ``flock``'ed files beside the
  database (the kernel releases them when a process dies);
* ``sidecar.py``: the ``<db>-sqlq/`` directory those files live in, beside the
  database's real path, and the checks that no other user can write in it;
* ``wakeup.py``: inotify on the database directory, or polling where there is none;
* ``sqlite3_put.py``: ``sqlq.put(conn)`` through Python's own ``sqlite3`` module.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from typing import Any, TypeVar

from ...errors import Error
from ..base import Backend, Conn, Durability, Notifier
from . import owners, sidecar
from .db import Database
from .store import SQLiteStore
from .wakeup import make_notifier

T = TypeVar("T")

#: How often (at most) a holder looks whether its owner file is still in place (the
#: sidecar may have been deleted under it): a clock read per reserve, a stat a second.
OWNER_CHECK_S = 1.0


class SQLiteBackend(Backend):
    """A sqlq database in one SQLite file (see :class:`sqlq.Queue` for the arguments)."""

    store: SQLiteStore

    def __init__(self, path: str, *, durability: Durability = "full", init: bool = False,
                 clock: Callable[[], int], vfs: str | None = None,
                 driver: str | None = None) -> None:
        super().__init__()
        self.location = os.path.abspath(path)
        self._path = path  # as given: what SQLite opens, and messages name
        self.db = Database(path, durability=durability, init=init, clock=clock, vfs=vfs,
                           driver=driver)
        self.durability = self.db.durability
        self.store = SQLiteStore()
        self._clock = clock
        # Beside the real file, symlinks resolved: one sidecar per file, whatever its name.
        self._sidecar = sidecar.sidecar_dir(self.db.real_path)
        self._owner: owners.Owner | None = None
        self._owner_checked = 0.0
        self._owner_lock = threading.Lock()

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

    def owner_token(self) -> str:
        """Registered on first use (which also clears away the files of owners that died
        holding nothing: nothing else would); after that, registered again under the same
        token if the owner file vanished (at most one look per OWNER_CHECK_S)."""
        with self._owner_lock:
            owner = self._owner
            if owner is None:
                owner = self._owner = owners.Owner(self._path, self.db.real_path)
                self._owner_checked = time.monotonic()
                registered = True
            else:
                registered = False
                now = time.monotonic()
                if now - self._owner_checked >= OWNER_CHECK_S:
                    self._owner_checked = now
                    owner.check()
        if registered:
            self._reap_owner_files(owner.token)
        return owner.token

    def _reap_owner_files(self, me: str) -> None:
        """Give back what dead owners held and remove their files (and stale ``.new``
        files): the Queue reaps only owners that hold live reservations."""
        candidates = [t for t in owners.registered(self._sidecar) if t != me]
        dead = self.dead_owners(candidates)
        if not dead:
            return
        holding = set(self.read(lambda c: self.store.reserving_owners(c, self._clock(), me)))
        if holding.intersection(dead):
            self.write(lambda c: sum(self.store.release_owner(c, t) for t in dead
                                     if t in holding), durable=False)
        for token in dead:
            self.forget_owner(token)

    def current_owner(self) -> str | None:
        return None if self._owner is None else self._owner.token

    def dead_owners(self, tokens: Sequence[str]) -> list[str]:
        """Only an owner file that exists and can be locked proves a death (owners.py)."""
        return [token for token in tokens if owners.is_dead(self._sidecar, token)]

    def owner_info(self, token: str) -> tuple[str, int | None]:
        pid = token.split("-", 1)[0]  # owners.Owner: "<pid>-<random>", on this host
        return os.uname().nodename, int(pid) if pid.isdigit() else None

    def forget_owner(self, token: str) -> None:
        owners.forget(self._sidecar, token)

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
        real = self.db.real_path
        return make_notifier(real, sidecar.ensure(self._path, real), self.db.check_wal)

    def close(self) -> None:
        try:
            if self._owner is not None:
                self._owner.close(remove=self._released_all())
        finally:
            self.db.close()

    def _released_all(self) -> bool:
        """Whether this process holds no live reservation any more (the Queue gave them
        back before closing). If it still does (a full disk refused the release), the
        owner file is left in place, unlocked: proof of death, so that the next reserve
        anywhere takes them back (a missing file would prove nothing)."""
        assert self._owner is not None
        me = self._owner.token
        try:
            return me not in self.read(lambda c: self.store.reserving_owners(c, self._clock(), ""))
        except Error:
            return False
