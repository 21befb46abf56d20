"""The ``<db>-sqlq/`` directory beside a database file, and the trust we place in it.

It holds the owner files (owners.py) and ``notify`` (db.py, wakeup.py). Its path is
derived from the database's *real* path, with symlinks resolved as SQLite resolves
them for the -wal and -shm files: two processes that open one file through two
names must share one sidecar, or each takes the other's owners for dead.

What is in it decides whose jobs are taken back, so it is trusted only when
nobody else can write in it: a real directory (not a symlink), owned by this
user, by the database file's owner or by root, with no group or other write
bit. Files in it are opened with ``O_NOFOLLOW`` and checked the same way. A
process running as root on another user's database hands what it creates to
the file's owner, as SQLite does with the -wal and -shm files, so that the
owner's own processes can use them.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat

from ...errors import DatabaseError

SUFFIX = "-sqlq"


class UntrustedSidecar(DatabaseError):
    """The sidecar, or a file in it, could have been written by another user: refused."""


def real_path(db_path: str) -> str:
    """The path SQLite opens for db_path: absolute, every symlink resolved."""
    return os.path.realpath(db_path)


def sidecar_dir(real_db_path: str) -> str:
    return real_db_path + SUFFIX


def _trusted_uids(real_db_path: str) -> set[int]:
    uids = {os.geteuid(), 0}
    with contextlib.suppress(OSError):
        uids.add(os.stat(real_db_path).st_uid)
    return uids


def _hand_to_db_owner(real_db_path: str, path: str, fd: int | None = None) -> None:
    """As root, give what we created to the database file's owner (SQLite's robustFchown)."""
    if os.geteuid() != 0:
        return
    try:
        st = os.stat(real_db_path)
        if st.st_uid != 0:
            if fd is None:
                os.chown(path, st.st_uid, st.st_gid, follow_symlinks=False)
            else:
                os.fchown(fd, st.st_uid, st.st_gid)
    except OSError:
        pass  # it stays root's: usable by root, refused by nobody


def _refusal(db_path: str, path: str, st: os.stat_result, real_db_path: str,
             want_dir: bool) -> str | None:
    """Why path (lstat'ed as st) cannot be trusted, or None if it can."""
    kind = "directory" if want_dir else "regular file"
    is_kind = stat.S_ISDIR(st.st_mode) if want_dir else stat.S_ISREG(st.st_mode)
    if not is_kind:
        return f"{db_path}: {path} is not a {kind} (a symlink or something else); refusing it"
    if st.st_uid not in _trusted_uids(real_db_path):
        return (f"{db_path}: {path} belongs to uid {st.st_uid}, not to this user or the "
                "database's owner; refusing it (remove it if you trust nobody else wrote it)")
    if st.st_mode & 0o022:
        return (f"{db_path}: {path} is writable by other users (mode "
                f"{stat.S_IMODE(st.st_mode):04o}); refusing it (chmod 700 or remove it)")
    return None


def ensure(db_path: str, real_db_path: str | None = None) -> str:
    """Create the sidecar directory if missing and check it can be trusted; return its path.

    Raises:
        DatabaseError: it cannot be created.
        UntrustedSidecar: it exists but is not a real directory of this user (or the
            database's owner, or root) closed to other users' writes.
    """
    real = real_db_path or real_path(db_path)
    path = sidecar_dir(real)
    for attempt in range(1, 4):
        try:
            os.mkdir(path, 0o700)
            _hand_to_db_owner(real, path)
        except FileExistsError:
            pass
        except OSError as e:  # a read-only directory, a full disk: one line, not a traceback
            raise DatabaseError(f"{db_path}: cannot create {path} ({e.strerror})") from e
        try:
            st = os.lstat(path)
            break
        except OSError as e:
            if isinstance(e, FileNotFoundError) and attempt < 3:
                continue  # deleted between mkdir and lstat (rm -rf racing us): again
            raise DatabaseError(f"{db_path}: cannot use {path} ({e.strerror})") from e
    refusal = _refusal(db_path, path, st, real, want_dir=True)
    if refusal is not None:
        raise UntrustedSidecar(refusal)
    return path


def open_file(db_path: str, real_db_path: str, path: str, flags: int) -> int:
    """Open a file of the sidecar without following a symlink, and check whose it is.

    Raises:
        OSError: it cannot be opened.
        UntrustedSidecar: it is a symlink, or not a regular file of a trusted user
            closed to others' writes.
    """
    try:
        fd = os.open(path, flags | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, 0o600)
    except OSError as e:
        if e.errno == errno.ELOOP:  # O_NOFOLLOW met a symlink: planted, never ours
            raise UntrustedSidecar(f"{db_path}: {path} is a symlink; refusing it") from None
        raise
    try:
        if flags & os.O_CREAT:
            _hand_to_db_owner(real_db_path, path, fd)
        refusal = _refusal(db_path, path, os.fstat(fd), real_db_path, want_dir=False)
    except BaseException:
        os.close(fd)
        raise
    if refusal is not None:
        os.close(fd)
        raise UntrustedSidecar(refusal)
    return fd
