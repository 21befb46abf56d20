"""Which processes hold reservations, and whether they are still alive (the backend's
``owner_token``, ``dead_owners``, ``forget_owner``… are :class:`Owners`').

Every process that reserves jobs registers as an *owner*: a file
``<db>-sqlq/owner-<token>`` that it keeps open with an exclusive ``flock``.
The kernel drops the lock when the process dies, even by SIGKILL, and closing
the file raises an inotify event that wakes blocked workers. A worker that finds
an owner file it can lock knows the owner is gone, gives its reservations back
to the queue and removes the file: beanstalkd's "a dropped connection's jobs
return at once", for processes sharing a file.

Only that proves a death. A missing, unreadable or replaced owner file proves
nothing: the sidecar may have been deleted (``rm -rf``, a cleaner, a restore)
under a live holder, whose jobs must not go to a second worker. The holder
notices (:meth:`Owner.check`) and registers again under the same token; if it
died first, its jobs come back when their TTR runs out, as any lease does.

flock locks belong to the open file description, so they are not disturbed by
other descriptors, unlike POSIX record locks; the descriptor is close-on-exec so
a shell command run by a worker does not keep its owner alive.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import stat
import threading
import time
import weakref
from collections.abc import Callable, Sequence
from functools import partial

from ...errors import DatabaseError, Error
from . import sidecar
from .db import Database
from .store import SQLiteStore

_live: weakref.WeakSet[Owner] = weakref.WeakSet()

PREFIX = "owner-"
#: Suffix of an owner file being registered (locked, then renamed into place).
NEW = ".new"
#: A ``.new`` file older than this, and unlocked, was left by a process killed while
#: registering. Younger ones may be between their creation and their lock.
STALE_NEW_S = 60.0
#: Attempts at registering while the sidecar keeps vanishing (``rm -rf`` racing us).
ATTEMPTS = 3
#: How often (at most) a holder looks whether its owner file is still in place (the
#: sidecar may have been deleted under it): a clock read per reserve, a stat a second.
OWNER_CHECK_S = 1.0


class Owner:
    """This process's registration: a token and the locked file that proves it is alive."""

    def __init__(self, db_path: str, real_db_path: str) -> None:
        self._db_path = db_path
        self._real = real_db_path
        self.token = f"{os.getpid()}-{os.urandom(6).hex()}"
        self.path = os.path.join(sidecar.sidecar_dir(real_db_path), PREFIX + self.token)
        self._fd: int | None = None
        self._key: tuple[int, int] | None = None
        self._lock = threading.Lock()  # a heartbeat thread and a reserve may check at once
        self._register()
        _live.add(self)

    def _register(self) -> None:
        """Create and lock the owner file (again, under the same token, after it vanished).

        Lock under a private name, then rename into place: a checker never sees an
        owner file that is not locked yet (it would take it for a dead one). The old
        descriptor, if any, is closed only once the new file is in place.
        """
        for attempt in range(1, ATTEMPTS + 1):
            directory = sidecar.ensure(self._db_path, self._real)
            try:
                fd = self._create_locked()
                break
            except OSError as e:
                if isinstance(e, FileNotFoundError) and attempt < ATTEMPTS:
                    continue  # the directory was deleted meanwhile: make it again
                raise DatabaseError(f"{self._db_path}: cannot register this process as an "
                                    f"owner of reservations in {directory} ({e.strerror})"
                                    ) from e
        st = os.fstat(fd)
        old, self._fd, self._key = self._fd, fd, (st.st_dev, st.st_ino)
        if old is not None:
            os.close(old)

    def _create_locked(self) -> int:
        """The new owner file, locked and in place; on failure no descriptor (it would keep
        a dead owner alive) and no stray file are left."""
        tmp = self.path + NEW
        fd: int | None = None
        try:
            fd = sidecar.open_file(self._db_path, self._real, tmp,
                                   os.O_RDWR | os.O_CREAT | os.O_EXCL)
            fcntl.flock(fd, fcntl.LOCK_EX)
            with contextlib.suppress(OSError):  # for people only; a full disk may refuse it
                os.write(fd, f"pid {os.getpid()}\n".encode())
            os.rename(tmp, self.path)
            return fd
        except BaseException:
            if fd is not None:
                os.close(fd)
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise

    def check(self) -> None:
        """Register again if our file is gone or was replaced (the sidecar was deleted).

        Until then a reaper finds no file, which proves nothing, so our jobs are safe;
        registering again restores their instant recovery should this process die.
        """
        with self._lock:
            if self._fd is None:
                return
            try:
                st = os.stat(self.path)
                if (st.st_dev, st.st_ino) == self._key:
                    return
            except OSError:
                pass
            self._register()

    def close(self, remove: bool = True) -> None:
        """Unlock; ``remove=False`` leaves the (now unlocked) file as proof of our death,
        for a reaper to give back reservations we could not release ourselves."""
        if self._fd is not None:
            if remove:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(self.path)
            os.close(self._fd)
            self._fd = None

    def _forget_in_child(self) -> None:
        # A forked child shares the locked file description; if it kept it open,
        # this owner would look alive for as long as the child lives.
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


def is_dead(directory: str, token: str) -> bool:
    """True only if token's owner file exists, is the one at its path, and is unlocked.

    A missing or unreadable file is not a death (see the module's docstring). The
    file is checked again by path after the lock: one replaced meanwhile (its owner
    registered again) is not the file we locked.
    """
    path = os.path.join(directory, PREFIX + token)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            return False
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except OSError:
            return False
        now = os.stat(path, follow_symlinks=False)
        return (now.st_dev, now.st_ino) == (st.st_dev, st.st_ino)
    except OSError:
        return False
    finally:
        os.close(fd)


def is_alive(directory: str, token: str) -> bool:
    """True only if token's owner file exists and is locked: its process is alive. (A
    missing file, which :func:`is_dead` cannot call a death, is no sign of life either.)"""
    try:
        fd = os.open(os.path.join(directory, PREFIX + token),
                     os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    except OSError:
        return False
    finally:
        os.close(fd)
    return False


def registered(directory: str) -> list[str]:
    """The tokens with an owner file in directory; removes stale ``.new`` leftovers."""
    try:
        names = os.listdir(directory)
    except OSError:
        return []
    tokens = []
    for name in names:
        if not name.startswith(PREFIX):
            continue
        if name.endswith(NEW):
            _remove_stale_new(os.path.join(directory, name))
        else:
            tokens.append(name[len(PREFIX):])
    return tokens


def _remove_stale_new(path: str) -> None:
    """Remove a ``.new`` file whose registering process died before renaming it."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return
    try:
        if time.time() - os.fstat(fd).st_mtime < STALE_NEW_S:
            return
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        os.unlink(path)
    except OSError:
        pass
    finally:
        os.close(fd)


def forget(directory: str, token: str) -> None:
    """Remove a dead owner's file (its reservations were given back first)."""
    with contextlib.suppress(OSError):
        os.unlink(os.path.join(directory, PREFIX + token))


class Owners:
    """A backend's side of liveness: this process's :class:`Owner`, registered on first
    use (which also clears away the files of owners that died holding nothing: nothing
    else would), checked at most once per :data:`OWNER_CHECK_S` and registered again
    under the same token if its file vanished."""

    def __init__(self, path: str, db: Database, store: SQLiteStore,
                 clock: Callable[[], int]) -> None:
        self._path = path  # as given: what messages name
        self._db = db
        self._store = store
        self._clock = clock
        # Beside the real file, symlinks resolved: one sidecar per file, whatever its name.
        self.directory = sidecar.sidecar_dir(db.real_path)
        self._owner: Owner | None = None
        self._checked = 0.0
        self._lock = threading.Lock()

    def token(self) -> str:
        owner = self._owner
        if owner is not None and time.monotonic() - self._checked < OWNER_CHECK_S:
            return owner.token  # the common case, on every reserve: no lock taken
        with self._lock:
            owner = self._owner
            if owner is None:
                owner = self._owner = Owner(self._path, self._db.real_path)
                self._checked = time.monotonic()
                registered = True
            else:
                registered = False
                now = time.monotonic()
                if now - self._checked >= OWNER_CHECK_S:
                    self._checked = now
                    owner.check()
        if registered:
            self._reap_files(owner.token)
        return owner.token

    def _reap_files(self, me: str) -> None:
        """Give back what dead owners held and remove their files (and stale ``.new``
        files): the Queue reaps only owners that hold live reservations."""
        store = self._store
        dead = self.dead([t for t in registered(self.directory) if t != me])
        if not dead:
            return
        holding = set(self._db.read(partial(store.claims.reserving_owners,
                                            now=self._clock(), me=me)))
        if holding.intersection(dead):
            self._db.write(partial(store.claims.release_owners,
                                   owners=[t for t in dead if t in holding]), durable=False)
        for token in dead:
            forget(self.directory, token)

    def current(self) -> str | None:
        return None if self._owner is None else self._owner.token

    def dead(self, tokens: Sequence[str]) -> list[str]:
        """Only an owner file that exists and can be locked proves a death."""
        return [token for token in tokens if is_dead(self.directory, token)]

    def alive(self, tokens: Sequence[str]) -> list[str]:
        """The tokens whose owner file is in place and locked (the workers registry)."""
        return [token for token in tokens if is_alive(self.directory, token)]

    @staticmethod
    def info(token: str) -> tuple[str, int | None]:
        """(host, pid) of a token made by :class:`Owner`: "<pid>-<random>", on this host."""
        pid = token.split("-", 1)[0]
        return os.uname().nodename, int(pid) if pid.isdigit() else None

    def forget(self, token: str) -> None:
        forget(self.directory, token)

    def close(self) -> None:
        """Give up the registration: the owner file goes, unless this process still holds
        a live reservation (the Queue gave them back before closing; a full disk may
        have refused it). Then it stays in place, unlocked: proof of death, so that the
        next reserve anywhere takes them back (a missing file would prove nothing)."""
        if self._owner is None:
            return
        me = self._owner.token
        try:
            store = self._store
            released = me not in self._db.read(
                lambda c: store.claims.reserving_owners(c, self._clock(), ""))
        except Error:
            released = False
        self._owner.close(remove=released)


def _after_fork_in_child() -> None:
    for owner in list(_live):
        owner._forget_in_child()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)
