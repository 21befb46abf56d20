"""Linux's inotify(7), the three calls the notifier makes, through ctypes.

In place of the inotify-simple package, whose first ``INotify()`` in a process looks
libc up with ``ctypes.util.find_library("c")``: a child process (``ldconfig -p``) and
the parse of its list, at every worker's, server's or ``sqlq reserve``'s first wait
(a first notifier took 21.9-27.9 ms with it, 17.5-20.0 without, on a database in /tmp;
the rest is the kernel's, whose directory watch visits the directory's cached entries).
The calls are found among the symbols the interpreter has loaded already
(``CDLL(None)``: libc's, on glibc and musl alike). Events are read and parsed by the
notifier itself (wakeup.py), from the descriptor.
"""

from __future__ import annotations

import ctypes
import errno as errno_module
import io
import os
from enum import IntFlag


class Flags(IntFlag):
    """The event masks of <sys/inotify.h> the notifier uses."""

    ACCESS = 0x00000001
    MODIFY = 0x00000002
    CLOSE_WRITE = 0x00000008
    MOVED_FROM = 0x00000040
    MOVED_TO = 0x00000080
    CREATE = 0x00000100
    DELETE = 0x00000200
    DELETE_SELF = 0x00000400
    MOVE_SELF = 0x00000800
    Q_OVERFLOW = 0x00004000


_libc: ctypes.CDLL | None = None


def _call(name: str, *args: object) -> int:
    """A libc call; OSError (with errno and strerror) when it returns -1."""
    global _libc
    if _libc is None:
        _libc = ctypes.CDLL(None, use_errno=True)
    try:
        function = getattr(_libc, name)
    except AttributeError:  # a libc without it: the notifier polls instead
        raise OSError(errno_module.ENOSYS, f"{name}: not in this C library") from None
    result = int(function(*args))
    if result == -1:
        errno = ctypes.get_errno()
        raise OSError(errno, os.strerror(errno))
    return result


class INotify:
    """One inotify instance: a descriptor (non-blocking, close-on-exec) and its watches.
    The descriptor is held by a file object, so that an instance nobody closed closes it
    when collected."""

    def __init__(self) -> None:
        self._file = io.FileIO(_call("inotify_init1", os.O_NONBLOCK | os.O_CLOEXEC), "rb")

    def fileno(self) -> int:
        return self._file.fileno()

    def add_watch(self, path: str | bytes, mask: int) -> int:
        """Watch path for the events in mask; the watch descriptor events name."""
        return _call("inotify_add_watch", self.fileno(), os.fsencode(path),
                     ctypes.c_uint32(mask))

    def rm_watch(self, wd: int) -> None:
        _call("inotify_rm_watch", self.fileno(), wd)

    def close(self) -> None:
        self._file.close()
