"""Which processes hold reservations, and whether they are still alive.

Every process that reserves jobs registers as an *owner*: a file
``<db>-sqlq/owner-<token>`` that it keeps open with an exclusive ``flock``.
The kernel drops the lock when the process dies, even by SIGKILL, and closing
the file raises an inotify event that wakes blocked workers. A worker that finds
an owner file it can lock knows the owner is gone, gives its reservations back
to the queue and removes the file: beanstalkd's "a dropped connection's jobs
return at once", for processes sharing a file.

flock locks belong to the open file description, so they are not disturbed by
other descriptors, unlike POSIX record locks; the descriptor is close-on-exec so
a shell command run by a worker does not keep its owner alive.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import weakref

from ...errors import DatabaseError

_live: weakref.WeakSet[Owner] = weakref.WeakSet()


def owners_dir(db_path: str) -> str:
    return os.path.abspath(db_path) + "-sqlq"


def ensure_dir(db_path: str) -> str:
    path = owners_dir(db_path)
    try:
        os.mkdir(path, 0o700)
    except FileExistsError:
        pass
    except OSError as e:  # a read-only directory, a full disk: one line, not a traceback
        raise DatabaseError(f"{db_path}: cannot create {path} ({e.strerror})") from e
    return path


class Owner:
    """This process's registration: a token and the locked file that proves it is alive."""

    def __init__(self, db_path: str) -> None:
        directory = ensure_dir(db_path)
        self.token = f"{os.getpid()}-{os.urandom(6).hex()}"
        self.path = os.path.join(directory, f"owner-{self.token}")
        # Lock under a private name, then rename into place: a checker never sees
        # an owner file that is not locked yet (it would take it for a dead one).
        tmp = self.path + ".new"
        self._fd: int | None = None
        try:
            self._fd = os.open(tmp, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
            fcntl.flock(self._fd, fcntl.LOCK_EX)
            with contextlib.suppress(OSError):  # for people only; a full disk may refuse it
                os.write(self._fd, f"pid {os.getpid()}\n".encode())
            os.rename(tmp, self.path)
        except OSError as e:
            # Leave no descriptor (it would keep a dead owner alive) and no stray file.
            if self._fd is not None:
                os.close(self._fd)
                self._fd = None
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise DatabaseError(f"{db_path}: cannot register this process as an owner of "
                                f"reservations in {directory} ({e.strerror})") from e
        _live.add(self)

    def close(self) -> None:
        if self._fd is not None:
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


def is_alive(db_path: str, token: str) -> bool:
    """True while the process that registered token holds its lock."""
    path = os.path.join(owners_dir(db_path), f"owner-{token}")
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)
    return False


def forget(db_path: str, token: str) -> None:
    with contextlib.suppress(FileNotFoundError):
        os.unlink(os.path.join(owners_dir(db_path), f"owner-{token}"))


def _after_fork_in_child() -> None:
    for owner in list(_live):
        owner._forget_in_child()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)
