"""Bad input: every one is refused with one clear line, and the file is left as it was.

Files that are not sqlq databases (garbage, empty, truncated, another
application's, a newer sqlq's), files sqlq cannot write (read-only file,
read-only directory, full disk), a file on a network filesystem (a warning),
and arguments out of range. Each is checked through the Python API (a
``sqlq.Error`` or ``ValueError``/``TypeError`` with a one-line message) and,
where a user meets it from the shell, through ``sqlq`` (exit 1 or 2, one line on
stderr, no traceback).

The tests run as root in CI, where permission bits stop nothing: read-only
files and directories are made with read-only mounts (a bind mount of the file,
a tmpfs remounted read-only) and a full disk with a 256 KiB tmpfs. Where
mounting is not allowed (no root, a container without CAP_SYS_ADMIN, or
SQLQ_TEST_NO_MOUNT=1) plain permission bits are used when not root, a VFS that
answers SQLITE_FULL stands in for the full disk, and what cannot be faked is
skipped with the reason.
"""

from __future__ import annotations

import functools
import logging
import math
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import apsw
import pytest

import sqlq
from sqlq.backends.sqlite import mounts as sqlq_mounts
from tests import forkserver
from tests.conftest import ROOT
from tests.groups import GateClock, run_as_group

pytestmark = pytest.mark.both_apis  # q and fq: as a Queue, then as an AsyncQueue

SQLQ = str(Path(sys.executable).parent / "sqlq")
MIB = 1 << 20


# -- helpers -----------------------------------------------------------------------------------

def snapshot(path: Path) -> tuple[bytes, int]:
    return path.read_bytes(), path.stat().st_mtime_ns


def files_of(q: sqlq.Queue) -> object:
    """The database file and its -wal as bytes, to show a refused call wrote nothing; on
    a server (PostgreSQL) there are no files: the callers check total-jobs instead."""
    if "://" in q.path:
        return None
    return snapshot(Path(q.path)), snapshot(Path(f"{q.path}-wal"))


def listing(directory: Path) -> dict[str, tuple[bytes, int] | None]:
    """Every entry of the directory, with the bytes and mtime of the files."""
    return {p.name: snapshot(p) if p.is_file() else None for p in sorted(directory.iterdir())}


def one_line(message: str) -> str:
    assert "Traceback" not in message, message
    lines = message.strip().splitlines()
    assert len(lines) == 1, message
    return lines[0]


def cli(db: Path, *args: str, input: bytes | None = None, code: int = 1) -> str:
    """Run the real ``sqlq`` console script; check its exit code and its one-line error."""
    result = forkserver.run([SQLQ, "--db", str(db), *args], input=input, capture_output=True,
                            timeout=60)
    stderr = result.stderr.decode(errors="replace")
    assert result.returncode == code, (result.returncode, stderr)
    if code:
        line = one_line(stderr)
        assert line.startswith("sqlq"), line
        return line
    return result.stdout.decode(errors="replace")


def refused(path: Path, error: type[Exception], match: str, **options: object) -> str:
    """Opening path with sqlq fails with error, in one line that names the file."""
    with pytest.raises(error, match=match) as info:
        sqlq.Queue(str(path), **options)  # type: ignore[arg-type]
    message = one_line(str(info.value))
    assert str(path) in message, message
    return message


def make_queue(path: Path, jobs: int = 20, body: bytes = b"x" * 3000) -> list[int]:
    with sqlq.Queue(str(path), durability="normal") as q:
        return q.put_many([body] * jobs)


# -- mounts (root only) ------------------------------------------------------------------------

@functools.cache
def can_mount() -> str | None:
    """None if this process may mount filesystems, else why not."""
    if os.environ.get("SQLQ_TEST_NO_MOUNT"):
        return "SQLQ_TEST_NO_MOUNT is set"
    if os.geteuid() != 0 or not shutil.which("mount"):
        return "not root"
    probe = tempfile.mkdtemp(prefix="sqlq-mount-probe-")
    try:
        if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", probe],
                          capture_output=True).returncode != 0:
            return "mount is not permitted here (no CAP_SYS_ADMIN?)"
        subprocess.run(["umount", probe], check=True)
        return None
    finally:
        os.rmdir(probe)


class Mounts:
    """Mounts made by one test, undone when it ends."""

    def __init__(self) -> None:
        self.points: list[str] = []

    def run(self, *args: str) -> None:
        subprocess.run(["mount", *args], check=True, capture_output=True)

    def tmpfs(self, directory: Path, size: str) -> None:
        directory.mkdir(exist_ok=True)
        self.run("-t", "tmpfs", "-o", f"size={size},mode=0700", "tmpfs", str(directory))
        self.points.append(str(directory))

    def read_only_file(self, path: Path) -> None:
        self.run("--bind", str(path), str(path))
        self.points.append(str(path))
        self.run("-o", "remount,ro,bind", str(path))

    def remount_read_only(self, directory: Path) -> None:
        self.run("-o", "remount,ro", str(directory))

    def undo(self) -> None:
        for point in reversed(self.points):
            if subprocess.run(["umount", point], capture_output=True).returncode:
                subprocess.run(["umount", "-l", point], capture_output=True)


@pytest.fixture
def mounts() -> Iterator[Mounts]:
    reason = can_mount()
    if reason:
        pytest.skip(f"needs mount: {reason}")
    m = Mounts()
    yield m
    m.undo()


# -- files that are not sqlq databases ---------------------------------------------------------

def test_not_a_database(tmp_path: Path) -> None:
    path = tmp_path / "notes.db"
    path.write_bytes(b"Dear diary, today I stored my jobs in a text file.\n" * 200)
    before = listing(tmp_path)
    refused(path, sqlq.SchemaError, "not a SQLite database")
    assert "not a SQLite database" in cli(path, "stats")
    assert listing(tmp_path) == before


def test_empty_file(tmp_path: Path) -> None:
    path = tmp_path / "empty.db"
    path.touch()
    before = listing(tmp_path)
    refused(path, sqlq.SchemaError, "empty file")
    assert "empty file" in cli(path, "stats")
    assert listing(tmp_path) == before


@pytest.mark.parametrize("content", [b"x", b"\n", b"SQLite format 3\x00", b"y" * 511],
                         ids=["1-byte", "newline", "header-only", "511-bytes"])
def test_a_file_shorter_than_any_database(tmp_path: Path, content: bytes) -> None:
    """SQLite reads a file under its 100-byte header as empty and would make a new queue
    of it, even for the read-only ``sqlq stats``: no database is under 512 bytes."""
    path = tmp_path / "short.db"
    path.write_bytes(content)
    before = listing(tmp_path)
    refused(path, sqlq.SchemaError, "not a SQLite database")
    assert "not a SQLite database" in cli(path, "stats")
    assert "not a SQLite database" in cli(path, "put", "x")
    assert listing(tmp_path) == before


def test_a_queue_truncated_to_one_byte_is_not_started_again(tmp_path: Path) -> None:
    path = tmp_path / "q.db"
    make_queue(path, jobs=3)
    shutil.rmtree(f"{path}-sqlq")
    with open(path, "r+b") as f:
        f.truncate(1)
    before = listing(tmp_path)
    refused(path, sqlq.SchemaError, "1 bytes")
    assert listing(tmp_path) == before


def test_init_still_adopts_a_one_byte_file(tmp_path: Path) -> None:
    path = tmp_path / "adopt.db"
    path.write_bytes(b"\n")
    with sqlq.Queue(str(path), init=True) as q:
        assert q.put(b"x") == 1


@pytest.mark.parametrize("keep", [16, 100, 4096, 0.5])
def test_truncated_database(tmp_path: Path, keep: float) -> None:
    whole = tmp_path / "whole.db"
    make_queue(whole, jobs=200)
    data = whole.read_bytes()
    path = tmp_path / "cut" / "q.db"
    path.parent.mkdir()
    path.write_bytes(data[: int(len(data) * keep) if keep < 1 else int(keep)])
    before = listing(path.parent)
    message = refused(path, sqlq.Error, "corrupt|not a SQLite database|malformed")
    assert "Traceback" not in message
    cli(path, "stats")
    assert listing(path.parent) == before


@pytest.mark.parametrize("journal", ["delete", "wal"])
def test_another_applications_database(tmp_path: Path, journal: str) -> None:
    path = tmp_path / "app.db"
    conn = apsw.Connection(str(path))
    conn.execute(f"PRAGMA journal_mode = {journal}").fetchall()
    conn.execute("CREATE TABLE users (id INTEGER PRIMARY KEY, name TEXT);"
                 "INSERT INTO users VALUES (1, 'ada'), (2, 'grace')")
    conn.close()
    before = listing(tmp_path)
    message = refused(path, sqlq.SchemaError, "another application's tables")
    assert "users" in message
    assert "users" in cli(path, "stats")
    assert listing(tmp_path) == before


def test_adopting_another_applications_database_leaves_its_tables_alone(tmp_path: Path) -> None:
    """With init=True sqlq adds its own tables, and never reads or writes the others."""
    path = tmp_path / "app.db"
    conn = apsw.Connection(str(path))
    conn.execute("CREATE TABLE users (id INTEGER PRIMARY KEY, name TEXT);"
                 "CREATE TABLE jobs (id INTEGER PRIMARY KEY, what TEXT);"  # a name sqlq could want
                 "INSERT INTO users VALUES (1, 'ada'); INSERT INTO jobs VALUES (7, 'theirs')")
    conn.close()

    def theirs() -> list[object]:
        # Opened and closed around sqlq: one process must not hold the file through two
        # SQLite handles that sqlq does not know about.
        conn = apsw.Connection(str(path))
        try:
            return [conn.execute("SELECT sql FROM sqlite_master WHERE name IN ('users', 'jobs') "
                                 "ORDER BY name").fetchall(),
                    conn.execute("SELECT * FROM users").fetchall(),
                    conn.execute("SELECT * FROM jobs").fetchall(),
                    {r[0] for r in conn.execute(
                        "SELECT name FROM sqlite_master WHERE type = 'table'")
                     if not r[0].startswith(("sqlq_", "sqlite_"))}]
        finally:
            conn.close()

    before = theirs()
    with sqlq.Queue(str(path), init=True, durability="normal") as q:
        job_id = q.put(b"hello")
        job = q.reserve(timeout=0)
        assert job is not None and job.id == job_id
        job.delete()
        q.stats()
    assert theirs() == before
    assert before[3] == {"users", "jobs"}


def test_newer_schema(tmp_path: Path) -> None:
    path = tmp_path / "q.db"
    make_queue(path, jobs=3)
    conn = apsw.Connection(str(path))
    conn.execute("INSERT INTO sqlq_schema (version, name, applied_at) "
                 "VALUES (999, '0999_from_the_future', 0)")
    conn.close()
    before = listing(tmp_path)
    refused(path, sqlq.SchemaError, "newer sqlq")
    assert "newer sqlq" in cli(path, "stats")
    assert listing(tmp_path) == before


def test_a_directory_or_a_missing_directory(tmp_path: Path) -> None:
    refused(tmp_path, sqlq.DatabaseError, "is a directory")
    refused(tmp_path / "nowhere" / "q.db", sqlq.DatabaseError, "does not exist")
    assert not (tmp_path / "nowhere").exists()


# -- files sqlq cannot write -------------------------------------------------------------------

def _check_read_only_file(path: Path) -> None:
    before = snapshot(path)
    with sqlq.Queue(str(path)) as q:  # reading a read-only queue is allowed: stats, peek
        assert q.stats()["current-jobs-ready"] == 5
        assert q.peek_ready() is not None
        with pytest.raises(sqlq.DatabaseError, match="read-only") as info:
            q.put(b"more")
        one_line(str(info.value))
        with pytest.raises(sqlq.DatabaseError, match="read-only"):
            q.reserve(timeout=0)
    assert "current-jobs-ready" in cli(path, "stats", code=0)
    assert "read-only" in cli(path, "put", "more")
    assert snapshot(path) == before
    wal = Path(f"{path}-wal")
    assert not wal.exists() or wal.stat().st_size == 0


def test_read_only_file(tmp_path: Path) -> None:
    path = tmp_path / "q.db"
    make_queue(path, jobs=5)
    if os.geteuid() != 0:
        path.chmod(0o400)
        _check_read_only_file(path)
        return
    reason = can_mount()
    if reason is None:
        m = Mounts()
        try:
            m.read_only_file(path)
            _check_read_only_file(path)
        finally:
            m.undo()
        return
    if subprocess.run(["chattr", "+i", str(path)], capture_output=True).returncode == 0:
        try:
            _check_read_only_file(path)
        finally:
            subprocess.run(["chattr", "-i", str(path)], check=True)
        return
    pytest.skip(f"root ignores permission bits, and neither a read-only mount ({reason}) "
                "nor chattr +i is available")


def test_read_only_directory(tmp_path: Path) -> None:
    directory = tmp_path / "ro"
    m = Mounts()
    if os.geteuid() == 0:
        reason = can_mount()
        if reason:
            pytest.skip(f"root ignores permission bits and a read-only mount needs: {reason}")
        m.tmpfs(directory, "1m")
    else:
        directory.mkdir()
    try:
        path = directory / "q.db"
        make_queue(path, jobs=5)
        if os.geteuid() == 0:
            m.remount_read_only(directory)
        else:
            directory.chmod(0o500)
        before = listing(directory)
        refused(path, sqlq.DatabaseError, "read-only")
        assert "read-only" in cli(path, "stats")
        refused(directory / "new.db", sqlq.DatabaseError, "cannot create")
        assert listing(directory) == before
    finally:
        if os.geteuid() != 0:
            directory.chmod(0o700)
        m.undo()


def _fill_and_check(q: sqlq.Queue, path: Path, fill: Callable[[], None],
                    free: Callable[[], None]) -> None:
    """Puts fail with 'disk full' and change nothing; once space is back all is well."""
    kept = q.put_many([b"k" * 1000] * 10)
    fill()
    for body in (b"y" * 200_000, b"z"):
        with pytest.raises(sqlq.DatabaseError, match="disk full") as info:
            q.put(body)
        one_line(str(info.value))
    with pytest.raises(sqlq.DatabaseError, match="disk full"):  # a claim is a write too
        q.reserve(timeout=0)
    free()
    assert q.put(b"after") > max(kept)
    conn = apsw.Connection(str(path))
    assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
    ids = [r[0] for r in conn.execute("SELECT id FROM sqlq_jobs ORDER BY id")]
    conn.close()
    assert set(kept) <= set(ids) and len(ids) == len(kept) + 1


def test_full_disk(tmp_path: Path, mounts: Mounts) -> None:
    directory = tmp_path / "small"
    mounts.tmpfs(directory, "256k")
    path = directory / "q.db"
    filler = directory / "filler"

    def fill() -> None:
        fd = os.open(filler, os.O_WRONLY | os.O_CREAT, 0o600)
        try:
            while True:
                os.write(fd, b"\0" * 4096)
        except OSError:
            pass
        finally:
            os.close(fd)

    with sqlq.Queue(str(path)) as q:
        _fill_and_check(q, path, fill, filler.unlink)
    fill()
    assert one_line(cli(path, "put", "x" * 100_000)).startswith("sqlq")
    filler.unlink()


@pytest.mark.parametrize("size", ["64k", "160k", "192k", "256k"])
def test_a_new_file_on_a_small_disk_is_whole_or_absent(tmp_path: Path, mounts: Mounts,
                                                      size: str) -> None:
    """A new file's schema fits or does not: the Queue opens a whole file, or one clear
    error leaves no file; never a malformed one (the schema was once built in a private
    -wal whose checkpoint failed silently when the disk filled, then deleted with it:
    the file linked into place could not be opened)."""
    directory = tmp_path / "small"
    mounts.tmpfs(directory, size)
    path = directory / "q.db"
    try:
        q = sqlq.Queue(str(path))
    except sqlq.DatabaseError as e:
        assert "full" in str(e) and "\n" not in str(e)
        assert list(directory.iterdir()) == []
        return
    with q:
        assert q.stats()["current-jobs-ready"] == 0
    conn = apsw.Connection(str(path))
    try:
        assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
    finally:
        conn.close()


class FullVFS(apsw.VFS):
    """SQLite's own VFS, except that while ``full`` is set every write answers SQLITE_FULL."""

    def __init__(self, name: str) -> None:
        super().__init__(name, "")
        self.full = False

    def xOpen(self, name: object, flags: list[int]) -> apsw.VFSFile:
        return FullFile(self, name, flags)


class FullFile(apsw.VFSFile):
    def __init__(self, vfs: FullVFS, name: object, flags: list[int]) -> None:
        super().__init__("", name, flags)  # type: ignore[arg-type]
        self._vfs = vfs

    def xWrite(self, data: bytes, offset: int) -> None:
        if self._vfs.full:
            raise apsw.FullError("disk full (simulated)")
        super().xWrite(data, offset)

    def xTruncate(self, newsize: int) -> None:
        if self._vfs.full:
            raise apsw.FullError("disk full (simulated)")
        super().xTruncate(newsize)


def test_full_disk_simulated(tmp_path: Path) -> None:
    """The same as test_full_disk, anywhere: a VFS that answers SQLITE_FULL."""
    name = f"full-{os.getpid()}"
    vfs = FullVFS(name)
    try:
        path = tmp_path / "q.db"
        with sqlq.Queue(str(path), vfs=name) as q:
            _fill_and_check(q, path, lambda: setattr(vfs, "full", True),
                            lambda: setattr(vfs, "full", False))
    finally:
        vfs.unregister()


@pytest.mark.parametrize("cache_pages", [2000, 10])
def test_full_disk_under_a_group_of_writers(tmp_path: Path, cache_pages: int) -> None:
    """Puts from threads sharing a Queue, queued behind a commit into one group, meet a
    full disk: each caller gets the one-line error, the file is unchanged, and once
    space is back the same threads' puts go through. With a small page cache the disk
    fills inside a put (SQLite spills pages to the WAL before the commit) and the group's
    transaction ends there; with the default one, at its commit."""
    name = f"full-group-{os.getpid()}"
    vfs = FullVFS(name)
    clock = GateClock()
    try:
        path = tmp_path / "q.db"
        with sqlq.Queue(str(path), vfs=name, clock=clock) as q:
            kept = q.put_many([b"k" * 1000] * 10)
            q.backend.db.conn.execute(f"PRAGMA cache_size = {cache_pages}")  # type: ignore[attr-defined]
            q.backend.db.outside_transaction(  # type: ignore[attr-defined]
                lambda c: c.execute("PRAGMA wal_checkpoint(TRUNCATE)"))
            before = files_of(q)
            vfs.full = True
            _, outcomes = run_as_group(q, clock, [
                lambda n=n: q.put(b"y" * (n * 50_000)) for n in range(5)])
            for kind, error in outcomes:
                assert kind == "error" and isinstance(error, sqlq.DatabaseError), outcomes
                assert "disk full" in one_line(str(error))
            assert files_of(q) == before
            vfs.full = False
            _, outcomes = run_as_group(q, clock.reset(), [lambda: q.put(b"after")] * 3)
            assert all(kind == "ok" and value > max(kept) for kind, value in outcomes)
    finally:
        vfs.unregister()


def test_owner_registration_failure_is_one_line(tmp_path: Path) -> None:
    """A reserve that cannot register its process (no room, no directory) says so in one line."""
    path = tmp_path / "q.db"
    make_queue(path, jobs=1)
    with sqlq.Queue(str(path)) as q:
        shutil.rmtree(f"{path}-sqlq", ignore_errors=True)  # the sidecar the open made
        Path(f"{path}-sqlq").write_text("not a directory")
        with pytest.raises(sqlq.DatabaseError, match="-sqlq is not a directory") as info:
            q.reserve(timeout=0)
        one_line(str(info.value))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["q.db", "q.db-sqlq"]


# -- network filesystems -----------------------------------------------------------------------

MOUNTS = """\
sysfs /sys sysfs rw,nosuid,nodev,noexec,relatime 0 0
/dev/sda1 / ext4 rw,relatime 0 0
server:/export /mnt/nfs nfs4 rw,relatime,vers=4.2 0 0
/dev/sdb1 /mnt/nfs/local ext4 rw 0 0
//nas/share /mnt/my\\040share cifs rw 0 0
user@host:/home /home/me/remote fuse.sshfs rw,nosuid,nodev 0 0
tmpfs /mnt/nfsdata tmpfs rw 0 0
"""


@pytest.mark.parametrize(("path", "expected"), [
    ("/mnt/nfs/q.db", "nfs4"),
    ("/mnt/nfs/deep/er/q.db", "nfs4"),
    ("/mnt/nfs/local/q.db", None),         # a local disk mounted inside the NFS tree
    ("/mnt/nfsdata/q.db", None),           # a prefix of the name is not a parent directory
    ("/mnt/my share/q.db", "cifs"),        # \040 in the mount table is a space
    ("/home/me/remote/jobs/q.db", "fuse.sshfs"),
    ("/var/lib/q.db", None),
])
def test_network_filesystem_detection(tmp_path: Path, path: str, expected: str | None) -> None:
    table = tmp_path / "mounts"
    table.write_text(MOUNTS)
    assert sqlq_mounts.network_filesystem(path, str(table)) == expected


def test_network_filesystem_is_warned_once(tmp_path: Path, caplog: pytest.LogCaptureFixture,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    table = tmp_path / "mounts"
    table.write_text(MOUNTS + f"server:/q {tmp_path} nfs rw 0 0\n")
    path = tmp_path / "q.db"
    with caplog.at_level(logging.WARNING, logger="sqlq"):
        assert sqlq_mounts.warn_if_network_filesystem(str(path), str(table)) == "nfs"
        assert sqlq_mounts.warn_if_network_filesystem(str(path), str(table)) == "nfs"
    warnings = [r for r in caplog.records if "network filesystem" in r.getMessage()]
    assert len(warnings) == 1 and str(path) in warnings[0].getMessage()
    assert sqlq_mounts.network_filesystem(str(path), str(tmp_path / "no-such-table")) is None

    # Opening a Queue there warns and still works (the warning is advice, not a refusal).
    caplog.clear()
    real = sqlq_mounts.network_filesystem
    monkeypatch.setattr(sqlq_mounts, "network_filesystem",
                        lambda p, mounts="/proc/mounts": real(p, str(table)))
    other = tmp_path / "other.db"
    with caplog.at_level(logging.WARNING, logger="sqlq"), sqlq.Queue(str(other)) as q:
        q.put(b"x")
    assert any(str(other) in r.getMessage() for r in caplog.records)


def test_this_machine_local_tmp_is_not_network(tmp_path: Path) -> None:
    fstype = sqlq_mounts.network_filesystem(str(tmp_path / "q.db"))
    assert fstype is None or fstype in sqlq_mounts.NETWORK_FILESYSTEMS


# -- bodies and arguments ----------------------------------------------------------------------

def test_body_at_and_over_the_limit(tmp_path: Path) -> None:
    path = tmp_path / "q.db"
    with sqlq.Queue(str(path), durability="normal") as q:
        job_id = q.put(b"\x00" * MIB)  # exactly the limit: accepted
        assert len(q.peek(job_id).body) == MIB  # type: ignore[union-attr]
        before = snapshot(path), snapshot(Path(f"{path}-wal"))
        for body in (b"\x00" * (MIB + 1), "é" * (MIB // 2 + 1)):  # str counts encoded bytes
            with pytest.raises(sqlq.JobTooBig) as info:
                q.put(body)
            assert str(MIB) in one_line(str(info.value))
        with pytest.raises(sqlq.JobTooBig):
            q.put_many([b"ok", b"\x00" * (MIB + 1)])  # all or nothing
        assert q.stats()["total-jobs"] == 1
        assert (snapshot(path), snapshot(Path(f"{path}-wal"))) == before
    with sqlq.Queue(str(tmp_path / "small.db"), max_job_size=100) as q:
        q.put(b"x" * 100)
        with pytest.raises(sqlq.JobTooBig):
            q.put(b"x" * 101)
    assert cli(path, "put", "-", input=b"\x01" * MIB, code=0).strip().isdigit()
    assert "sqlq" in cli(path, "put", "-", input=b"\x01" * (MIB + 1))


BAD_ARGUMENTS: list[tuple[str, dict[str, object], type[Exception], str]] = [
    ("put", {"tube": ""}, sqlq.InvalidTube, "tube"),
    ("put", {"tube": "-starts-with-dash"}, sqlq.InvalidTube, "tube"),
    ("put", {"tube": "has space"}, sqlq.InvalidTube, "tube"),
    ("put", {"tube": "x" * 201}, sqlq.InvalidTube, "tube"),
    ("put", {"tube": "caf\u00e9"}, sqlq.InvalidTube, "tube"),
    ("put", {"tube": "nul\x00"}, sqlq.InvalidTube, "tube"),
    ("put", {"tube": b"bytes"}, TypeError, "tube"),
    ("put", {"priority": -1}, ValueError, "priority"),
    ("put", {"priority": 2**32}, ValueError, "priority"),
    ("put", {"priority": 1.5}, TypeError, "priority"),
    ("put", {"priority": True}, TypeError, "priority"),
    ("put", {"priority": "1"}, TypeError, "priority"),
    ("put", {"delay": -1}, ValueError, "delay"),
    ("put", {"delay": math.nan}, ValueError, "delay"),
    ("put", {"delay": math.inf}, ValueError, "delay"),
    ("put", {"delay": 2**32}, ValueError, "delay"),
    ("put", {"delay": "5s"}, TypeError, "delay"),
    ("put", {"ttr": -1}, ValueError, "ttr"),
    ("put", {"ttr": math.nan}, ValueError, "ttr"),
    ("put", {"ttr": None}, TypeError, "ttr"),
    ("put", {"unique_key": 7}, TypeError, "unique_key"),
    ("put", {"on_conflict": "overwrite", "unique_key": "k"}, ValueError, "on_conflict"),
    ("put", {"on_conflict": None, "unique_key": "k"}, ValueError, "on_conflict"),
    ("put", {"on_conflict": "REPLACE", "unique_key": "k"}, ValueError, "on_conflict"),
    ("put", {"on_conflict": "replace"}, ValueError, "unique_key"),
    ("put", {"on_conflict": "replace", "unique_key": "k", "after": 1}, ValueError, "after"),
    ("reserve", {"timeout": -1}, ValueError, "timeout"),
    ("reserve", {"timeout": "soon"}, TypeError, "timeout"),
    ("reserve", {"timeout": math.nan}, TypeError, "timeout"),
    ("reserve", {"timeout": 2**32}, ValueError, "timeout"),
    ("reserve", {"timeout": 1e300}, ValueError, "timeout"),
    ("reserve", {"timeout": math.inf}, ValueError, "timeout"),
    ("result", {"timeout": 1e300}, ValueError, "timeout"),
    ("reserve", {"tubes": []}, ValueError, "tubes"),
    ("reserve", {"tubes": ["ok", "not ok"]}, sqlq.InvalidTube, "tubes"),
    ("kick", {"bound": -1}, ValueError, "bound"),
    ("pause_tube", {"seconds": -5}, ValueError, "seconds"),
    ("pause_tube", {"seconds": math.nan}, ValueError, "seconds"),
]


@pytest.mark.face
@pytest.mark.parametrize(("method", "kwargs", "error", "name"), BAD_ARGUMENTS,
                         ids=[f"{m}-{next(iter(k))}-{next(iter(k.values()))!r}"[:60]
                              for m, k, _, _ in BAD_ARGUMENTS])
def test_invalid_arguments(q: sqlq.Queue, method: str, kwargs: dict[str, object],
                           error: type[Exception], name: str) -> None:
    q.put(b"there is one job")
    before = files_of(q)
    call: dict[str, Callable[..., object]] = {
        "put": lambda **kw: q.put(b"body", **kw),
        "reserve": lambda **kw: q.reserve(**{"timeout": 0, **kw}),
        "kick": lambda **kw: q.kick(**kw),
        "result": lambda **kw: q.result(1, **kw),
        "pause_tube": lambda **kw: q.pause_tube("default", **kw),
    }
    with pytest.raises(error) as info:
        call[method](**kwargs)
    assert name in one_line(str(info.value)), info.value
    assert files_of(q) == before
    assert q.stats()["total-jobs"] == 1


# -- job ids no job can have (reliability F7) -----------------------------------------------

OUT_OF_RANGE_IDS = [2**63, 2**64, 10**20, 0, -1]


@pytest.mark.parametrize("job_id", OUT_OF_RANGE_IDS)
def test_out_of_range_ids_are_not_found(q: sqlq.Queue, job_id: int) -> None:
    """Past SQLite's integers (or below 1) an id names no job: None or JobNotFound, as the
    server's NOT_FOUND, never a builtin OverflowError."""
    q.put(b"there is one job")
    before = files_of(q)
    assert q.peek(job_id) is None
    verbs: list[Callable[[int], object]] = [
        q.delete, q.release, q.bury, q.touch, q.kick_job, q.reserve_job, q.stats_job,
        q.complete, lambda i: q.result(i, timeout=0)]
    for verb in verbs:
        with pytest.raises(sqlq.JobNotFound) as info:
            verb(job_id)
        assert str(job_id) in one_line(str(info.value))
    assert files_of(q) == before
    assert q.stats()["total-jobs"] == 1


@pytest.mark.face
@pytest.mark.parametrize("job_id", ["1", 1.0, True, None])
def test_ids_that_are_not_ints_name_the_argument(q: sqlq.Queue, job_id: object) -> None:
    q.put(b"x")
    verbs: list[Callable[[Any], object]] = [
        q.peek, q.delete, q.release, q.bury, q.touch, q.kick_job, q.reserve_job, q.stats_job,
        q.complete, lambda i: q.result(i, timeout=0)]
    for verb in verbs:
        with pytest.raises(TypeError, match="job_id"):
            verb(job_id)


def test_a_kick_bound_past_any_count_kicks_everything(q: sqlq.Queue) -> None:
    for _ in range(3):
        q.put(b"x")
        job = q.reserve(timeout=0)
        assert job is not None
        job.bury()
    assert q.kick(2**64) == 3
    assert q.stats()["current-jobs-ready"] == 3
    with pytest.raises(TypeError, match="bound"):
        q.kick("5")  # type: ignore[arg-type]


@pytest.mark.parametrize("args", [
    ["peek", str(2**63)], ["peek", "99999999999999999999"], ["delete", str(2**63)],
    ["kick-job", str(2**64)], ["touch", str(2**63)], ["stats", "--job", str(2**63)],
    ["result", "--timeout", "0", str(2**63)],
])
def test_out_of_range_ids_from_the_shell_exit_3(tmp_path: Path, args: list[str]) -> None:
    path = tmp_path / "q.db"
    make_queue(path, jobs=1)
    before = listing(tmp_path)
    assert "not found" in cli(path, *args, code=3)
    assert listing(tmp_path) == before


def test_a_huge_kick_bound_from_the_shell_kicks_everything(tmp_path: Path) -> None:
    path = tmp_path / "q.db"
    make_queue(path, jobs=1)
    assert cli(path, "kick", "99999999999999999999", code=0).strip() == "kicked 0 jobs"


# -- dependencies, cancel and progress from the shell (issues 24, 25) -------------------------

#: Usage errors of the commands and options issues 24 and 25 added (exit 2, the file as it
#: was): test_invalid_arguments_from_the_shell runs them with the rest.
NEW_USAGE_ERRORS = [
    ["put", "--after", "abc", "x"],
    ["put", "--after", "0", "x"],
    ["put", "--after", "1,two", "x"],
    ["put", "--after", "\u0661", "x"],
    ["put", "--after", "1_0", "x"],
    ["put", "--after", str(2**63), "x"],
    ["put", "--after", "", "x"],
    ["put-many", "--after", "abc"],
    ["put", "--replace", "x"],  # a replace needs --unique-key
    ["put", "--replace", "--unique-key", "k", "--after", "1", "x"],
    ["publish", "--replace", "topic", "x"],
    ["put-many", "--after", "-1"],
    ["cancel"],
    ["cancel", "abc"],
    ["cancel", "0"],
    ["cancel", "--", "-1"],
    ["cancel", "\u0661"],  # int() reads it as 1: it cancelled job 1
    ["cancel", "1_0"],  # ... and this as 10
    ["delete", "\u0661"],
    ["progress", "1"],
    ["progress", "1", "abc"],
    ["progress", "1", "150%"],
    ["progress", "1", "--", "-1"],
    ["progress", "1", "nan"],
    ["progress", "1", "inf"],
    ["progress", "1", "1e400"],
    ["progress", "1", "1.5"],
    ["progress", "1", "%"],
    ["progress", "1", "\u0663"],  # int() and float() read these: stored as 3 and 0.5
    ["progress", "1", "\uff15\uff10%"],
    ["progress", "1", "1_000"],
    ["progress", "1", "0.5", "--message", "m" * 1025],
    ["progress", "abc", "0.5"],
]


@pytest.mark.parametrize("args", [
    ["put", "--tube", "-bad", "x"],
    ["put", "--tube", "a b", "x"],
    ["put", "--priority", "-1", "x"],
    ["put", "--priority", "4294967296", "x"],
    ["put", "--delay", "5x", "x"],
    ["put", "--delay", "-1", "x"],
    ["put", "--ttr", "abc", "x"],
    ["put", "--ttr", "nan", "x"],
    ["reserve", "--timeout", "forever-ish"],
    ["reserve", "--timeout", "99999999999d"],
    ["result", "--timeout", "99999999999d", "1"],
    ["put", "--delay", "\uff11\uff12", "x"],
    ["put", "--ttr", "\u0663", "x"],
    ["pause", "default", "\u0663"],
    ["pause", "default", "1y"],
    ["work", "--prefetch", "0", "--import", "tests.jobs"],
    ["work", "--prefetch", "1.5", "--import", "tests.jobs"],
    ["work", "--prefetch", "lots", "--import", "tests.jobs"],
    ["work", "--prefetch", "\u0663", "--import", "tests.jobs"],
    ["work", "--prefetch", "99999999999", "--import", "tests.jobs"],
    *NEW_USAGE_ERRORS,
])
def test_invalid_arguments_from_the_shell(tmp_path: Path, args: list[str]) -> None:
    path = tmp_path / "q.db"
    make_queue(path, jobs=1)
    before = listing(tmp_path)
    line = cli(path, *args, input=b"a\nb\n", code=2)
    assert any(says in line for says in ("Invalid value", "Missing argument", "No such option",
                                          "must be")), line
    assert listing(tmp_path) == before


def test_manage_py_sqlq_with_an_unusable_queue_is_one_line(tmp_path: Path) -> None:
    """``manage.py sqlq`` (the Django app) opens the configured queue before the CLI
    runs: a queue it cannot open is the CLI's one line and exit 1, not a traceback."""
    site = ROOT / "examples" / "django_site"
    env = dict(os.environ, PYTHONPATH=str(site.parents[1]),
               DJANGO_DATABASE_URL=str(tmp_path / "site.db"),
               SHOP_SQLQ_DB=str(tmp_path / "missing" / "jobs.db"))
    run = forkserver.run([sys.executable, str(site / "manage.py"), "sqlq", "stats"], env=env,
                         cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert run.returncode == 1, run.stderr
    assert run.stderr.count("\n") == 1 and "Traceback" not in run.stderr, run.stderr
    assert "missing" in run.stderr and "does not exist" in run.stderr
    assert not (tmp_path / "missing").exists()
def test_flask_sqlq_with_an_unusable_queue_is_one_line(tmp_path: Path) -> None:
    """``flask sqlq`` (examples/flask_app) on a queue that is missing or cannot be opened:
    sqlq's one line and exit code, not a traceback, and nothing created."""
    examples = ROOT / "examples"
    env = dict(os.environ, PYTHONPATH=f"{examples}{os.pathsep}{examples.parent}",
               FLASK_SQLALCHEMY_DATABASE_URI=f"sqlite:///{tmp_path / 'words.db'}")
    garbage = tmp_path / "garbage.db"
    garbage.write_bytes(b"garbage " * 100)
    for config, says in (({"FLASK_SQLQ_DB": str(tmp_path / "jobs.db")},  # a typo: not made
                          "no database at"),
                         ({"FLASK_SQLQ_DB": str(garbage)}, "not a SQLite database"),
                         ({"FLASK_SQLALCHEMY_DATABASE_URI": "sqlite://"}, "set SQLQ_DB")):
        def queue_files() -> dict[str, Any]:  # the app's own words.db is made by create_app
            return {k: v for k, v in listing(tmp_path).items() if not k.startswith("words")}

        before = queue_files()
        run = forkserver.run(
            [sys.executable, "-m", "flask", "--app", "flask_app", "sqlq", "stats"],
            env=dict(env, **config), cwd=tmp_path, capture_output=True, text=True, timeout=60)
        assert run.returncode == 1, run.stderr
        assert run.stderr.count("\n") == 1 and "Traceback" not in run.stderr, run.stderr
        assert says in run.stderr, run.stderr
        assert queue_files() == before




@pytest.mark.parametrize(("args", "says"), [
    (["put", "--after", "55", "x"], "job 55 not found"),
    (["put-many", "--after", "1", "--after", "55"], "job 55 not found"),
    (["cancel", "55"], "job 55 not found"),
    (["cancel", str(2**63)], "not found"),
    (["progress", "55", "0.5"], "job 55 not found"),
    (["progress", "1", "50%"], "job 1 is not reserved"),
])
def test_dependency_cancel_and_progress_on_no_such_job_exit_3(tmp_path: Path, args: list[str],
                                                              says: str) -> None:
    """Not found (exit 3, one line), and nothing put, cancelled or written."""
    path = tmp_path / "q.db"
    make_queue(path, jobs=1)
    before = listing(tmp_path)
    assert says in cli(path, *args, input=b"a\nb\n", code=3)
    assert listing(tmp_path) == before


# -- the dashboard's new actions (issues 25, 26) ----------------------------------------------

def _contents(q: sqlq.Queue, ids: list[int]) -> object:
    """What a refused request must leave as it was: the counts, and each job's state."""
    stats = q.stats()
    counts = {k: v for k, v in stats.items() if k.startswith("current-jobs") or k in (
        "total-jobs", "cmd-delete", "cmd-kick")}
    jobs = {}
    for job_id in ids:
        job = q.peek(job_id)
        jobs[job_id] = None if job is None else (job.state, job.reserves)
    return counts, jobs, [(g.error, g.reason, g.jobs) for g in q.failed_groups()]


def _refused_page(reply: Any, status: int) -> None:
    assert reply.status == status, (reply.status, reply.text[:300])
    assert "Traceback" not in reply.text and "internal error" not in reply.text


def test_dashboard_actions_refuse_garbage_and_change_nothing(db_url: str) -> None:
    """cancel-job with ids that name no job (or name one only to ``int()``), the Failed
    page's group retry/delete with a forged or garbage key or verb, logout without the
    CSRF token: a 4xx page each, no traceback, and the jobs as they were."""
    from sqlq.dashboard.views import group_key
    from tests.dashboard_client import running

    with sqlq.Queue(db_url, durability="normal") as q:
        ids = q.put_many([b"a", b"b", b"c"])
        held = q.reserve(timeout=0)
        assert held is not None
        buried = q.reserve(timeout=0)
        assert buried is not None
        buried.bury(reason="broken")
        before = _contents(q, ids)
        with running(q) as client:
            csrf = client.csrf
            for job_id, status in (("", 400), ("abc", 400), ("-1", 400), ("1.0", 400),
                                   ("\u0661", 400), ("\uff11", 400), ("1 OR 1=1", 400),
                                   ("99999999999", 404), (str(2**64), 404)):
                reply = client.post("/actions/cancel-job", {"csrf": csrf, "id": job_id})
                _refused_page(reply, status)
            # No CSRF token: refused before anything is read.
            _refused_page(client.post("/actions/cancel-job", {"id": ids[0]}), 403)
            forged = [group_key("NoSuchError", "never happened"),
                      group_key("NoSuchError", "", "app.py:1 in f"), base64_json(["a", "b"])]
            garbage = ["", "!!", "e30=", "WzEsIDJd", "bnVsbA==", "W10=",
                       base64_json(["a", "b", "c", "d"]), base64_json(["a", 1, "c"]),
                       base64_json("text"), "x" * 5000]
            for key in garbage:
                for verb in ("kick", "delete"):
                    reply = client.post("/actions/group", {"csrf": csrf, "key": key,
                                                           "verb": verb, "confirm": "yes"})
                    _refused_page(reply, 400)
            real = group_key("", "broken")
            for verb in ("", "bury", "drop table", "DELETE"):
                reply = client.post("/actions/group", {"csrf": csrf, "key": real, "verb": verb,
                                                       "confirm": "yes"})
                _refused_page(reply, 400)
            for key in forged:  # a well-formed key of no group: acts on nothing
                reply = client.post("/actions/group", {"csrf": csrf, "key": key,
                                                       "verb": "delete", "confirm": "yes"})
                assert reply.status == 303, reply.status
                assert "0+of+0+jobs" in reply.headers["Location"], reply.headers
            _refused_page(client.post("/logout", {}), 403)
            _refused_page(client.post("/logout", {"csrf": "forged"}), 403)
            _refused_page(client.get("/logout"), 404)  # a POST only
        assert _contents(q, ids) == before
        held.delete()  # the holder's lease was never touched by any of it


def base64_json(value: object) -> str:
    import base64
    import json

    return base64.urlsafe_b64encode(json.dumps(value).encode()).decode()


@pytest.mark.face
@pytest.mark.parametrize("target", ["//evil.example/", "https://evil.example/", "/\\evil",
                                    "javascript:alert(1)", "/ok\r\nSet-Cookie: x=1"])
def test_dashboard_actions_never_redirect_off_site(db_url: str, target: str) -> None:
    """An action's ``next=`` that is not a path on this site is replaced by ``/``: the
    action is done, the browser stays here (no open redirect, no header injection)."""
    from tests.dashboard_client import running

    with sqlq.Queue(db_url, durability="normal") as q:
        kept, cancelled = q.put_many([b"kept", b"cancelled"])
        with running(q) as client:
            reply = client.post("/actions/cancel-job", {"csrf": client.csrf, "id": cancelled,
                                                        "next": target})
            assert reply.status == 303
            assert reply.headers["Location"].split("?")[0] == "/", reply.headers
            assert "evil" not in reply.headers["Location"]
            assert "Set-Cookie" not in reply.headers
        assert q.peek(cancelled) is None and q.peek(kept) is not None
