"""``Queue.backup(dest)`` and ``sqlq backup DEST``: a consistent copy of a live queue in a
new SQLite file, while producers and workers go on.

How, and why so:

* a SQLite queue is copied with ``VACUUM INTO`` (:meth:`Backend.snapshot_into`): one read
  transaction's view of the whole file, which in WAL mode blocks no writer. SQLite's
  online backup API in steps restarts whenever another connection writes, so under a
  steady writer it never finishes; in one step it is as fast as ``VACUUM INTO`` but
  differs between the two drivers (figures: docs/operations.md#backups);
* a PostgreSQL queue is copied row by row, as ``sqlq copy`` moves it, from one
  REPEATABLE READ snapshot into a new SQLite file: a portable copy of the queue (not of
  the server: that is pg_dump's job). As with ``sqlq copy``, a reserved job is copied
  as ready;
* the copy is made in a private directory (mode 0700) beside DEST, so it is on DEST's
  filesystem and never readable by others, in a file created 0600; it is then opened as
  sqlq opens a file (WAL mode set, schema checked), passes ``PRAGMA integrity_check``,
  is closed (its WAL checkpointed away), fsynced, linked to DEST (replacing it only with
  ``force``) and the directory fsynced. A failure at any step leaves DEST as it was and
  nothing beside it.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import stat
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass

from .backends import Backend, companions, identity, is_url, open_backend
from .copy import copy_between
from .errors import DatabaseError, Error
from .model import OnProgress

#: The files SQLite keeps beside a database in use (WAL mode, or a rollback journal).
IN_USE_SUFFIXES = ("-wal", "-shm", "-journal")


@dataclass(frozen=True)
class Backup:
    """What :meth:`sqlq.Queue.backup` wrote."""

    path: str  #: DEST, as given
    size: int  #: bytes
    seconds: float  #: how long the copy took


def backup(backend: Backend, dest: str | os.PathLike[str], *, force: bool = False,
           clock: Callable[[], int], progress: OnProgress | None = None) -> Backup:
    """Write a consistent copy of backend's database to the new SQLite file dest, calling
    ``progress(count, fraction)`` as it goes: bytes written (a file) or jobs copied.

    Raises:
        Error: dest exists (without force), is a directory, is in a missing directory,
            is not a regular file, is the queue's own file or one of its companions
            (``companions``), is named as a database's -wal, -shm or -journal, or cannot
            be written; nothing is changed.
    """
    dest = os.fspath(dest)
    _check(backend, dest, force)
    started = time.monotonic()
    parent = os.path.dirname(os.path.abspath(dest))
    try:
        staging = tempfile.mkdtemp(prefix=f".{os.path.basename(dest)}.sqlq-backup-", dir=parent)
    except OSError as e:
        raise Error(f"{dest}: cannot write the backup ({e.strerror})") from None
    try:
        staged = os.path.join(staging, "copy.db")
        _write(backend, staged, dest, clock, progress)
        _place(staged, dest, force)
    except OSError as e:
        raise Error(f"{dest}: cannot write the backup ({e.strerror})") from None
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return Backup(dest, os.path.getsize(dest), time.monotonic() - started)


def _check(backend: Backend, dest: str, force: bool) -> None:
    """Refuse, before anything is written, a DEST the backup must not (or cannot) take."""
    if not dest or is_url(dest):
        raise Error(f"{dest or repr(dest)}: a backup is a file path (sqlq copy writes to a "
                    "database server)")
    if os.path.isdir(dest):
        raise Error(f"{dest}: is a directory")
    parent = os.path.dirname(os.path.abspath(dest))
    if not os.path.isdir(parent):
        raise Error(f"{dest}: directory {parent} does not exist")
    if not is_url(backend.location):
        for own, what in companions(backend.location):
            if identity(dest) == own:
                raise Error(f"{dest}: is the queue's own {what}")
            if identity(dest).startswith(own + os.sep):
                raise Error(f"{dest}: is inside the queue's {what} (sqlq's own files)")
    for suffix in IN_USE_SUFFIXES:
        if dest.endswith(suffix) or identity(dest).endswith(suffix):
            # A live database's -wal holds its latest commits: replaced, they are lost.
            raise Error(f"{dest}: a name ending in {suffix} is a SQLite database's own "
                        "file (replacing a live one loses its commits); choose another name")
    _check_kind(dest)
    if os.path.lexists(dest) and not force:
        raise _exists(dest)
    for suffix in ("-wal", "-journal"):
        if _size(dest + suffix):
            # Replacing a database under its -wal (or hot journal) would have SQLite
            # replay that stale WAL into the copy: refuse, whatever force says. An
            # empty one, as a read-only reader leaves, holds nothing to replay.
            raise Error(f"{dest}: {dest}{suffix} is beside it, so it may be in use; stop "
                        f"what uses it, or remove {dest}{suffix} if nothing does")


def _check_kind(dest: str) -> None:
    """Refuse a DEST that is there but is not a regular file (or a symlink to one): a
    device node, a FIFO, a socket. ``--force`` replaces a file, never ``/dev/null``."""
    try:
        mode = os.stat(dest).st_mode  # through a symlink: what it points at
    except FileNotFoundError:
        return  # absent (or a dangling symlink): nothing there to lose
    except OSError as e:
        raise Error(f"{dest}: cannot look at it ({e.strerror})") from None
    if not stat.S_ISREG(mode):
        raise Error(f"{dest}: is {_kind(mode)}, not a regular file; a backup replaces "
                    "only a regular file")


def _kind(mode: int) -> str:
    kinds = ((stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
             (stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket"), (stat.S_ISDIR, "a directory"))
    return next((name for test, name in kinds if test(mode)), "not a file")


def _size(path: str) -> int:
    try:
        return os.path.getsize(path)
    except OSError:
        return 0


def _exists(dest: str) -> Error:
    return Error(f"{dest}: already exists (force=True, or sqlq backup --force, replaces it)")


def _write(backend: Backend, staged: str, dest: str, clock: Callable[[], int],
           progress: OnProgress | None) -> None:
    """The copy at staged, complete, checked and durable."""
    if backend.in_transaction():
        raise Error("a backup cannot run inside a transaction (it copies committed data)")
    os.close(os.open(staged, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600))
    try:
        if not backend.snapshot_into(staged, progress):
            os.unlink(staged)  # a new sqlq file, made (0600, atomically) by the copy's target
            target = open_backend(staged, clock=clock)
            try:
                copy_between(backend, target, progress)
            finally:
                target.close()
    except DatabaseError as e:  # named after the queue's file: say which copy failed
        raise DatabaseError(f"{dest}: the backup failed, nothing was written ({e})") from e
    copy = open_backend(staged, clock=clock)  # as sqlq opens a file: WAL mode, schema checked
    try:
        check = copy.check_integrity()
    finally:
        copy.close()
    if check != "ok":
        raise DatabaseError(f"{dest}: the copy failed SQLite's integrity check ({check}); "
                            "nothing was written")
    for suffix in IN_USE_SUFFIXES:
        if os.path.exists(staged + suffix):  # closing checkpoints the WAL and removes it
            raise DatabaseError(f"{dest}: the copy's {suffix} file outlived it; nothing "
                                "was written")
    fd = os.open(staged, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _place(staged: str, dest: str, force: bool) -> None:
    """Put the copy at dest in one step, then make its directory entry durable."""
    if force:
        _check_kind(dest)  # once more: a node made there while the copy was written
        os.replace(staged, dest)
    else:
        try:
            os.link(staged, dest)  # never replaces a file that appeared meanwhile
        except FileExistsError:
            raise _exists(dest) from None
        except OSError:
            # A filesystem without hard links: rename, after one more look.
            if os.path.lexists(dest):
                raise
            os.rename(staged, dest)
    fd = os.open(os.path.dirname(os.path.abspath(dest)), os.O_RDONLY)
    try:
        with contextlib.suppress(OSError):  # some filesystems refuse fsync on a directory
            os.fsync(fd)
    finally:
        os.close(fd)
