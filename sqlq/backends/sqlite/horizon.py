"""The SQLite half of :mod:`sqlq.horizon`: the -wal file's size and checkpoint starvation.

A reader's snapshot (an open ``sqlite3`` shell in a transaction, a backup reading
the file, an application's long ``BEGIN; SELECT``) keeps every checkpoint from
copying the WAL frames committed after it back into the file, and while any frame
is left the WAL cannot start again from its beginning: it grows with every commit,
without bound, until the reader ends (then ``journal_size_limit`` cuts it back).

A look runs ``PRAGMA wal_checkpoint(PASSIVE)``: the autocheckpoint's own step, which
waits for no one and takes no lock a writer needs; it copies what it can (what the
next autocheckpoint would have) and says how many frames it could not. The -wal
file is ``stat``'ed, never opened (opening and closing it would drop this
process's POSIX locks). SQLite does not say since when a reader has held its
snapshot, so the starvation is timed by this process: from the first look that
found the WAL starved, while no later look saw it start again.
"""

from __future__ import annotations

import os
import threading
from typing import TYPE_CHECKING

from .db import Database
from .store import SQLiteStore

if TYPE_CHECKING:
    from ...horizon import Horizon

#: SQLite's default autocheckpoint, in frames: a WAL that is not past it may be
#: waiting for its first checkpoint, not starved.
AUTOCHECKPOINT_FRAMES = 1000


class WalWatch:
    """Looks at one database's WAL; remembers since when it has been starved."""

    def __init__(self, db: Database, store: SQLiteStore) -> None:
        self.db = db
        self.store = store
        self._lock = threading.Lock()
        self._frames = 0  # frames in the WAL at the last look
        self._since: int | None = None  # ms: the first look of the current starvation

    def look(self, now: int) -> Horizon:
        """The WAL's size and starvation as of ``now`` (ms), after a passive checkpoint."""
        from ...horizon import Horizon  # a worker's and the dashboard's: not every process's

        try:
            wal_bytes = os.stat(self.db.real_path + "-wal").st_size
        except FileNotFoundError:
            wal_bytes = 0
        if self.db.in_transaction():  # a checkpoint cannot run inside one
            return Horizon("sqlite", now, wal_bytes=wal_bytes)

        frames, copied, frame_size = self.db.outside_transaction(self.store.checkpoint_passive)
        with self._lock:
            if frames < 0:  # another process was checkpointing: nothing learnt
                return Horizon("sqlite", now, self._age(now), wal_bytes=wal_bytes)
            starved = copied < frames and frames >= AUTOCHECKPOINT_FRAMES
            restarted = frames < self._frames  # the WAL began again since the last look
            if not starved:
                self._since = None
            elif self._since is None or restarted:
                self._since = now
            self._frames = frames
            return Horizon("sqlite", now, self._age(now), wal_bytes=wal_bytes,
                           wal_starved_bytes=max(frames - copied, 0) * frame_size)

    def _age(self, now: int) -> float:
        return 0.0 if self._since is None else max(now - self._since, 0) / 1000
