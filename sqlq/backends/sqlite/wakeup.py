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
seconds, which costs a little CPU and up to that much latency. So does a kernel
that refuses a watch (``ENOSPC``: ``fs.inotify.max_user_watches`` used up by
other programs), with a warning.

A commit event also checks that the ``-wal`` file is still the one this process
opened (``check``: :meth:`db.Database.check_wal`): a deleted ``-wal`` would lose
every commit made since. The watch itself proves it between checks: deleting,
renaming or replacing the ``-wal`` (or moving its directory) sends an event, so
once a check has passed with the watch up, the next wakes skip it (a stat, about
20 µs of a wake) until such an event, a lost event (queue overflow) or the watch
going down.
"""

from __future__ import annotations

import os
import select
import struct
import sys
from collections.abc import Callable, Sequence

from ...core.logger import logger
from ...errors import Error
from ..base import Events
from . import sidecar

#: The file db.Database._published reads after an fsync'd commit (in the owners directory).
NOTIFY_NAME = "notify"

_NOTIFY_BYTES = os.fsencode(NOTIFY_NAME)
#: struct inotify_event before its name (inotify(7)).
_EVENT = struct.Struct("iIII")
_EVENT_SIZE = _EVENT.size

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
#: select() takes descriptors below FD_SETSIZE only (Linux: 1024); poll() any.
SELECT_FD_LIMIT = 1024
#: Bytes asked of the inotify fd per read, and the largest event it can hold
#: (struct inotify_event, 16 bytes, then a name of up to NAME_MAX bytes and its NUL).
READ_SIZE = 65536
MAX_EVENT_SIZE = 16 + 255 + 1


class Notifier:
    """inotify watches on the database directory and the owners directory.

    ``db_path`` is the database's real path (symlinks resolved, as SQLite resolves
    them): the -wal is beside the real file. ``check`` runs after a commit event.
    """

    def __init__(self, db_path: str, owners_dir: str,
                 check: Callable[[], None] | None = None) -> None:
        from .inotify import Flags as flags  # ctypes: only for a process that waits
        from .inotify import INotify

        self._flags = flags
        # The masks drain tests, as plain ints: an IntFlag's & makes an enum member each
        # time, and a wake's first microseconds run cold (every extra step costs there).
        self._overflow = int(flags.Q_OVERFLOW)
        self._gone = int(flags.DELETE | flags.MOVED_FROM)
        self._not_a_write = int(flags.DELETE | flags.MOVED_FROM | flags.MOVED_TO | flags.CREATE)
        self._access = int(flags.ACCESS)
        self._check = check
        #: Set once the kernel refuses a watch: this notifier polls from then on.
        self._polling: PollingNotifier | None = None
        # Where SQLite keeps the -wal: beside the real file, symlinks resolved.
        real = sidecar.real_path(db_path)
        self._db_path = db_path
        # Names as the kernel gives them (bytes): drain compares them undecoded.
        self._wal_name = os.fsencode(os.path.basename(real) + "-wal")
        self._sidecar_name = os.fsencode(os.path.basename(owners_dir))
        self._inotify = INotify()
        self._db_dir = os.path.dirname(real)
        self._owners_dir = owners_dir
        self._db_wd = self._owners_wd = -1
        #: A check passed while the directory watch was up, and no event since says the
        #: -wal may have gone: commit events need no check (see the module docstring).
        self._wal_proved = False
        try:
            self._watch()
        except BaseException:
            self._inotify.close()
            raise

    def resume(self) -> None:
        """Watch again. Events start from here: look once more after resuming.

        A kernel that refuses a watch (ENOSPC: max_user_watches reached, or the owners
        directory deleted again and again) makes this notifier poll, with a warning.

        Raises:
            DatabaseError: the owners directory was deleted and cannot be made again,
                or is not to be trusted (sidecar.py).
        """
        if self._polling is not None or self._db_wd >= 0:
            return
        try:
            self._watch()
        except OSError as e:
            logger().warning("%s: cannot watch %s for changes (%s); polling instead",
                        self._db_path, self._db_dir, e.strerror or e)
            self.pause()
            self._polling = PollingNotifier(check=self._check)

    def _watch(self) -> None:
        """Add the watches (OSError if the kernel refuses one)."""
        # MODIFY: a commit was written to the -wal (maybe not published yet). DELETE,
        # MOVED_FROM: the owners directory (or the -wal) went away; the directory's own
        # IN_IGNORED would come only when no process holds a file of it open any more.
        # MOVED_TO, CREATE, DELETE_SELF, MOVE_SELF: the -wal (or its directory) may be
        # another file now: the next commit event checks it (_wal_proved).
        flags = self._flags
        self._wal_proved = False  # events from before this watch are not seen
        self._db_wd = self._inotify.add_watch(
            self._db_dir, flags.MODIFY | flags.CREATE | flags.DELETE | flags.MOVED_FROM
            | flags.MOVED_TO | flags.DELETE_SELF | flags.MOVE_SELF)
        self._watch_owners()

    def _watch_owners(self) -> None:
        """Watch the owners directory, making it again if it was deleted (``rm -rf``).

        CLOSE_WRITE of an owner file: its process closed it (or died). ACCESS of
        "notify": an fsync'd commit is visible now (db.Database._published).
        """
        mask = self._flags.CLOSE_WRITE | self._flags.ACCESS
        for attempt in range(1, 4):
            try:
                self._owners_wd = self._inotify.add_watch(self._owners_dir, mask)
                return
            except FileNotFoundError:
                if attempt == 3:
                    raise  # it keeps vanishing: the caller polls this time
                sidecar.ensure(self._db_path)

    def _rewatch_owners(self) -> bool:
        """Watch the owners directory again if it was lost; False if that failed for now."""
        if self._db_wd < 0 or self._owners_wd >= 0:
            return True
        try:
            self._watch_owners()
        except (OSError, Error):
            return False
        return True

    def _lost_owners_dir(self) -> None:
        """The owners directory was deleted or moved: watch its successor (in wait)."""
        if self._owners_wd >= 0:
            try:
                self._inotify.rm_watch(self._owners_wd)
            except OSError:
                pass
            self._owners_wd = -1

    def pause(self) -> None:
        """Stop watching while nobody waits: a watch costs the kernel an event on every
        write to the directory, this process's own commits included (a pwrite took 2.7
        µs watched against 1.0 µs unwatched, Linux 2026). Taking the watches down and up
        again costs about 10 µs, more after a wake: the Queue leaves them up from a
        wake until a reserve finds a job without waiting (Queue._wait)."""
        if self._db_wd < 0 and self._owners_wd < 0:
            return
        for wd in (self._db_wd, self._owners_wd):
            if wd < 0:
                continue
            try:
                self._inotify.rm_watch(wd)
            except OSError:
                pass
        self._db_wd = self._owners_wd = -1
        self._wal_proved = False
        self._discard()

    def _discard(self) -> None:
        """Drop what the watches queued, unread: resuming watches (and makes the owners
        directory) afresh, and its first look covers what happened meanwhile. A watch
        left up after a wake (Queue._wait) may have queued thousands of events, one per
        write of the thread's own: parsing them would cost microseconds each."""
        self._read_pending()

    def _read_pending(self) -> bytes:
        """Every whole event queued now, without blocking.

        A read into a large buffer takes whole events only and stops early only when the
        queue is empty (asking the kernel how many bytes are queued and reading exactly
        that many, as inotify-simple before 2.0 did, turns an event that arrives in
        between, as our own commits do while a watch lingers, into EINVAL).
        """
        fd = self._inotify.fileno()
        chunks = []
        try:
            while True:
                data = os.read(fd, READ_SIZE)
                chunks.append(data)
                if len(data) <= READ_SIZE - MAX_EVENT_SIZE:
                    break  # room was left for one more event: none was queued
        except BlockingIOError:
            pass
        return b"".join(chunks)

    def fileno(self) -> int | None:
        return None if self._polling is not None else int(self._inotify.fileno())

    def recheck_delays(self, first: bool) -> Sequence[float]:
        """The WAL race: a write event comes before the commit is published."""
        if self._polling is not None:
            return self._polling.recheck_delays(first)
        return RECHECK_DELAYS[:FIRST_RECHECKS] if first else RECHECK_DELAYS

    def drain(self) -> Events:
        """Consume pending events without blocking."""
        if self._polling is not None:
            return self._polling.drain()
        found = Events()
        data = self._read_pending()
        pos, end = 0, len(data)
        while pos < end:  # struct inotify_event: wd, mask, cookie, len, then the name
            wd, mask, _, size = _EVENT.unpack_from(data, pos)
            pos += _EVENT_SIZE + size
            name = data[pos - size:pos].rstrip(b"\0")  # NUL-padded
            if mask & self._overflow:
                found.commit = found.owner = True
                self._wal_proved = False
            elif wd == self._db_wd and name == self._sidecar_name:
                if mask & self._gone:
                    self._lost_owners_dir()
                    found.owner = True  # an owner's exit may have gone unseen: look
            elif wd == self._db_wd:
                if name == self._wal_name:
                    found.commit = True
                    if mask & self._not_a_write:
                        self._wal_proved = False  # not a write: deleted, moved, made
                elif not name:  # the directory itself: moved, deleted, unwatched
                    found.commit = True
                    self._wal_proved = False
            elif wd == self._owners_wd:
                if name == _NOTIFY_BYTES:
                    found.commit = found.commit or bool(mask & self._access)
                else:
                    found.owner = True
        if found.owner:
            self._rewatch_owners()  # event loops call drain, never wait
        return found

    def wait(self, timeout: float | None) -> Events:
        """Sleep until an event or timeout seconds; return what happened (empty on timeout)."""
        if self._polling is not None:
            return self._polling.wait(timeout)
        timeout = MAX_SLEEP if timeout is None else min(max(timeout, 0.0), MAX_SLEEP)
        unwatched = not self._rewatch_owners()
        if unwatched:  # no owners watch now: look for exited owners by polling
            timeout = min(timeout, POLL_INTERVAL)
        fd = self._inotify.fileno()
        if timeout < 0.001 and fd < SELECT_FD_LIMIT:
            # poll() counts whole milliseconds and CPython rounds up: the re-checks of
            # RECHECK_DELAYS under one (0.2 and 0.5 ms) waited 1.1 ms each. select()
            # counts microseconds, for descriptors below FD_SETSIZE only.
            ready = bool(select.select((fd,), (), (), timeout)[0])
        else:
            poller = select.poll()
            poller.register(fd, select.POLLIN)
            ready = bool(poller.poll(timeout * 1000))
        events = self.drain() if ready else Events()
        events.owner = events.owner or unwatched
        if events.commit and self._check is not None and not self._wal_proved:
            self._check()
            self._wal_proved = self._db_wd >= 0
        return events

    def close(self) -> None:
        self._inotify.close()


class PollingNotifier:
    """The fallback: no events, so every wait ends after POLL_INTERVAL with "maybe"."""

    def __init__(self, interval: float = POLL_INTERVAL,
                 check: Callable[[], None] | None = None) -> None:
        self._interval = interval
        self._check = check

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
        if self._check is not None:
            self._check()
        return Events(commit=True, owner=True)

    def close(self) -> None:
        pass


def make_notifier(db_path: str, owners_dir: str, check: Callable[[], None] | None = None
                  ) -> Notifier | PollingNotifier:
    """inotify where the platform has it, polling elsewhere or when SQLQ_POLL=1 (see
    :class:`Notifier` for the arguments)."""
    if sys.platform.startswith("linux") and os.environ.get("SQLQ_POLL") != "1":
        try:
            return Notifier(db_path, owners_dir, check)
        except ImportError:
            pass  # a Python built without ctypes
        except OSError as e:
            logger().warning("%s: cannot watch %s for changes (%s); polling instead",
                        db_path, os.path.dirname(db_path), e.strerror or e)
    return PollingNotifier(check=check)
