"""Waking blocked workers without busy polling.

A blocked ``reserve`` (or ``result``) sleeps on inotify and wakes when:

* any connection commits to the database, whatever library it uses: SQLite
  appends the commit to the ``-wal`` file, and we watch the *directory* for
  writes to that name. We never open the database, -wal or -shm files
  ourselves: closing any descriptor of them would drop SQLite's POSIX locks for
  the whole process.
* a process that held reservations closes its owner file (on exit or on
  SIGKILL the kernel closes it for it), so its jobs can be taken back at once.

The wake-up arrives when the commit frame is *written*, which is a moment
before SQLite publishes it in the shared-memory index. The caller therefore
confirms an event with ``PRAGMA data_version`` and, if nothing changed yet,
looks again on a short back-off schedule (:data:`RECHECK_DELAYS`) instead of
going back to sleep: no wakeup is lost to that race.

Without inotify (macOS, BSD, network filesystems with ``SQLQ_POLL=1``) the
notifier falls back to polling ``data_version`` every :data:`POLL_INTERVAL`
seconds, which costs a little CPU and up to that much latency.
"""

from __future__ import annotations

import os
import select
import sys
from collections.abc import Sequence

from ..base import Events

#: The file db.Database._published reads after an fsync'd commit (in the owners directory).
NOTIFY_NAME = "notify"

#: Polling period of the fallback notifier.
POLL_INTERVAL = 0.05
#: After an unconfirmed write event, look again after these many seconds.
#: The tail covers a foreign writer whose fsync stalls for seconds on a busy disk.
RECHECK_DELAYS = (0.0002, 0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5,
                  1.0, 2.0, 4.0)
#: When a wait begins, writes made just before the watch started sent no event: the
#: first RECHECK_DELAYS steps (under 10 ms) cover one still being published.
FIRST_RECHECKS = 6
#: Even with no event at all, a sleeper looks once in this many seconds.
MAX_SLEEP = 30.0



class Notifier:
    """inotify watches on the database directory and the owners directory."""

    def __init__(self, db_path: str, owners_dir: str) -> None:
        from inotify_simple import INotify, flags

        self._flags = flags
        self._wal_name = os.path.basename(db_path) + "-wal"
        self._inotify = INotify(nonblocking=True)
        self._db_dir = os.path.dirname(os.path.abspath(db_path))
        self._owners_dir = owners_dir
        self._db_wd = self._owners_wd = -1
        self.resume()

    def resume(self) -> None:
        """Watch again. Events start from here: look once more after resuming."""
        if self._db_wd >= 0:
            return
        flags = self._flags
        # MODIFY: a commit was written to the -wal (maybe not published yet).
        self._db_wd = self._inotify.add_watch(self._db_dir, flags.MODIFY | flags.CREATE)
        # CLOSE_WRITE of an owner file: its process closed it (or died). ACCESS of
        # "notify": an fsync'd commit is visible now (db.Database._published).
        self._owners_wd = self._inotify.add_watch(self._owners_dir,
                                                  flags.CLOSE_WRITE | flags.ACCESS)

    def pause(self) -> None:
        """Stop watching while nobody waits: a watch costs the kernel an event on every
        write to the directory, this process's own commits included (about 10 µs each)."""
        if self._db_wd < 0:
            return
        for wd in (self._db_wd, self._owners_wd):
            try:
                self._inotify.rm_watch(wd)
            except OSError:
                pass
        self._db_wd = self._owners_wd = -1
        self.drain()

    def fileno(self) -> int | None:
        return int(self._inotify.fileno())

    def recheck_delays(self, first: bool) -> Sequence[float]:
        """The WAL race: a write event comes before the commit is published."""
        return RECHECK_DELAYS[:FIRST_RECHECKS] if first else RECHECK_DELAYS

    def drain(self) -> Events:
        """Consume pending events without blocking."""
        found = Events()
        try:
            pending = self._inotify.read(timeout=0)
        except BlockingIOError:
            return found
        for event in pending:
            if event.mask & self._flags.Q_OVERFLOW:
                found.commit = found.owner = True
            elif event.wd == self._db_wd:
                if event.name == self._wal_name:
                    found.commit = True
            elif event.wd == self._owners_wd:
                if event.name == NOTIFY_NAME:
                    found.commit = found.commit or bool(event.mask & self._flags.ACCESS)
                else:
                    found.owner = True
        return found

    def wait(self, timeout: float | None) -> Events:
        """Sleep until an event or timeout seconds; return what happened (empty on timeout)."""
        timeout = MAX_SLEEP if timeout is None else min(max(timeout, 0.0), MAX_SLEEP)
        poller = select.poll()
        poller.register(self._inotify.fileno(), select.POLLIN)
        if poller.poll(timeout * 1000):
            return self.drain()
        return Events()

    def close(self) -> None:
        self._inotify.close()


class PollingNotifier:
    """The fallback: no events, so every wait ends after POLL_INTERVAL with "maybe"."""

    def __init__(self, interval: float = POLL_INTERVAL) -> None:
        self._interval = interval

    def fileno(self) -> int | None:
        return None

    def recheck_delays(self, first: bool) -> Sequence[float]:
        return ()  # every wait already ends with "maybe": each look is a re-check

    def drain(self) -> Events:
        return Events(commit=True, owner=True)

    def resume(self) -> None:
        pass

    def pause(self) -> None:
        pass

    def wait(self, timeout: float | None) -> Events:
        import time

        if timeout is not None and timeout < self._interval:
            time.sleep(max(timeout, 0.0))
            return Events()
        time.sleep(self._interval)
        return Events(commit=True, owner=True)

    def close(self) -> None:
        pass


def make_notifier(db_path: str, owners_dir: str) -> Notifier | PollingNotifier:
    """inotify where the platform has it, polling elsewhere or when SQLQ_POLL=1."""
    if sys.platform.startswith("linux") and os.environ.get("SQLQ_POLL") != "1":
        try:
            return Notifier(db_path, owners_dir)
        except (ImportError, OSError):
            pass
    return PollingNotifier()
