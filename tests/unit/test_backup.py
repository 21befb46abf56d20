"""`Queue.backup` / `sqlq backup`: a complete, checked, private copy, written atomically,
that refuses what it must not overwrite; and what a restored copy does with the jobs
that were reserved when it was taken. (Under a concurrent writer process:
tests/integration/test_backup.py.)"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import apsw
import pytest
from click.testing import CliRunner

import sqlq
from sqlq.cli import EXIT_ERROR, EXIT_OK, cli
from tests.conftest import is_postgres
from tests.timing import FakeClock


def check_copy(path: Path) -> None:
    """The copy is a whole sqlq file: private, WAL mode in its header (as sqlq leaves a
    file), nothing beside it, and SQLite's full check finds nothing."""
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    header = path.read_bytes()[:20]
    assert header[:16] == b"SQLite format 3\x00" and header[18:20] == b"\x02\x02"  # WAL
    assert sorted(p.name for p in path.parent.iterdir()) == [path.name]
    conn = apsw.Connection(str(path))  # read-write: its close removes the -wal it made
    try:
        assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
    finally:
        conn.close()


def fill(q: sqlq.Queue) -> dict[str, int]:
    ids = {"ready": q.put(b"ready", tube="a", priority=5),
           "delayed": q.put(b"\x00binary\xff", tube="a", delay=60),
           "buried": q.put(b"to bury", tube="b"),
           "done": q.put(b"gone", tube="b")}
    q.bury(q.reserve("b", timeout=0).id, reason="bad input")  # type: ignore[union-attr]
    q.delete(ids["done"])
    q.pause_tube("a", 30)
    return ids


@pytest.mark.sqlite3_driver
def test_the_copy_holds_every_job_and_opens_as_a_queue(q: sqlq.Queue, tmp_path: Path) -> None:
    ids = fill(q)
    q.put_many([f"job {i}".encode() for i in range(300)], tube="many")
    dest = tmp_path / "backups" / "copy.db"
    dest.parent.mkdir()
    done = q.backup(dest)
    assert done.path == str(dest) and done.size == dest.stat().st_size > 0
    check_copy(dest)
    with sqlq.Queue(dest) as copy:
        assert copy.peek(ids["ready"]).body == b"ready"  # type: ignore[union-attr]
        assert copy.peek(ids["delayed"]).state == "delayed"  # type: ignore[union-attr]
        buried = copy.peek(ids["buried"])
        assert buried is not None and (buried.state, buried.bury_reason) == ("buried",
                                                                             "bad input")
        assert copy.peek(ids["done"]) is None
        assert copy.stats_tube("many")["current-jobs-ready"] == 300
        assert copy.stats_tube("a")["pause"] > 0
        # The id counter goes on from the source's: no id is issued twice.
        assert copy.put(b"next") == q.put(b"next")


def test_an_existing_dest_is_refused_and_left_alone(q: sqlq.Queue, tmp_path: Path) -> None:
    q.put(b"x")
    dest = tmp_path / "keep.db"
    dest.write_bytes(b"precious")
    before = sorted(os.listdir(tmp_path))
    with pytest.raises(sqlq.Error, match="keep.db: already exists .*force"):
        q.backup(dest)
    assert dest.read_bytes() == b"precious" and sorted(os.listdir(tmp_path)) == before


def test_force_replaces_dest_with_a_private_copy(q: sqlq.Queue, tmp_path: Path) -> None:
    job = q.put(b"x")
    dest = tmp_path / "out" / "old.db"
    dest.parent.mkdir()
    dest.write_bytes(b"an old backup")
    dest.chmod(0o644)
    q.backup(str(dest), force=True)
    check_copy(dest)  # 0600: a new file took its place, not the old one rewritten
    with sqlq.Queue(dest) as copy:
        assert copy.peek(job).body == b"x"  # type: ignore[union-attr]


@pytest.mark.parametrize("where", ["a directory", "a missing parent", "the queue's URL"])
def test_a_bad_dest_is_one_line_and_leaves_nothing(q: sqlq.Queue, tmp_path: Path,
                                                   where: str) -> None:
    (tmp_path / "adir").mkdir()
    dest = {"a directory": tmp_path / "adir", "a missing parent": tmp_path / "no" / "b.db",
            "the queue's URL": "postgresql://nowhere/db"}[where]
    message = {"a directory": "is a directory", "a missing parent": "does not exist",
               "the queue's URL": "a backup is a file path"}[where]
    before = sorted(os.listdir(tmp_path))
    with pytest.raises(sqlq.Error, match=message) as caught:
        q.backup(dest, force=True)
    assert "\n" not in str(caught.value)
    assert sorted(os.listdir(tmp_path)) == before and os.listdir(tmp_path / "adir") == []


@pytest.mark.sqlite_only
def test_the_queues_own_file_or_a_file_in_use_is_never_replaced(q: sqlq.Queue,
                                                                 tmp_path: Path) -> None:
    with pytest.raises(sqlq.Error, match="is the queue's own file"):
        q.backup(q.path, force=True)
    in_use = tmp_path / "other.db"
    with sqlq.Queue(in_use) as other:
        other.put(b"live")
        with pytest.raises(sqlq.Error, match="other.db-wal is beside it"):
            q.backup(in_use, force=True)
        assert other.peek(1).body == b"live"  # type: ignore[union-attr]


def unchanged(path: Path) -> tuple[int, int, int]:
    """What must not change of a path a backup refused: its inode, kind and size."""
    st = os.lstat(path)
    return st.st_ino, st.st_mode, st.st_size


@pytest.mark.sqlite_only
@pytest.mark.both_apis  # the AsyncQueue's backup refuses the same
@pytest.mark.parametrize("own", ["-wal", "-shm", "-journal", "-sqlq/x.db", "a symlink to -wal"])
def test_the_queues_own_companions_are_never_replaced(q: sqlq.Queue, tmp_path: Path,
                                                      own: str) -> None:
    """The -wal holds the latest commits (replaced: they are lost, W7 of the reliability
    report), the -shm indexes it, the sidecar holds the owner files; with force too."""
    job = q.put(b"kept")
    if own == "a symlink to -wal":
        dest = tmp_path / "innocent.db"
        dest.symlink_to(q.path + "-wal")
    else:
        dest = Path(q.path + own)
    there = dest.exists()
    before = unchanged(dest) if there else None
    with pytest.raises(sqlq.Error, match="the queue's own|inside the queue's") as caught:
        q.backup(dest, force=True)
    assert "\n" not in str(caught.value)
    assert (unchanged(dest) if dest.exists() else None) == before
    assert q.peek(job).body == b"kept"  # type: ignore[union-attr]


@pytest.mark.parametrize("name", ["other.db-wal", "other.db-shm", "other.db-journal"])
def test_another_live_databases_companions_are_never_replaced(q: sqlq.Queue, tmp_path: Path,
                                                              name: str) -> None:
    with sqlq.Queue(tmp_path / "other.db") as other:
        job = other.put(b"live")
        dest = tmp_path / name
        dest.touch()  # the -journal, if SQLite had one
        before = unchanged(dest)
        with pytest.raises(sqlq.Error, match=f"a name ending in {name[8:]}"):
            q.backup(dest, force=True)
        assert unchanged(dest) == before
    with sqlq.Queue(tmp_path / "other.db") as other:
        assert other.peek(job).body == b"live"  # type: ignore[union-attr]


@pytest.mark.both_apis
@pytest.mark.parametrize("kind", ["a FIFO", "a symlink to /dev/null", "a character device"])
def test_a_dest_that_is_not_a_regular_file_is_never_replaced(q: sqlq.Queue, tmp_path: Path,
                                                             kind: str) -> None:
    """``--force`` replaces a file; a device node (``mknod myfull c 1 7``, what
    /dev/full is) or a FIFO stays what it is."""
    (tmp_path / "bk").mkdir()
    dest = tmp_path / "bk" / "dest"
    if kind == "a FIFO":
        os.mkfifo(dest)
    elif kind == "a symlink to /dev/null":
        dest.symlink_to("/dev/null")
    else:
        if os.geteuid() != 0:
            pytest.skip("mknod of a character device needs root")
        os.mknod(dest, 0o600 | stat.S_IFCHR, os.makedev(1, 7))
    before = unchanged(dest)
    expected = "a FIFO" if kind == "a FIFO" else "a character device"
    with pytest.raises(sqlq.Error, match=f"is {expected}, not a regular file"):
        q.backup(dest, force=True)
    assert unchanged(dest) == before
    assert os.listdir(tmp_path / "bk") == ["dest"]


def test_force_takes_a_dangling_symlink_or_one_to_a_file(q: sqlq.Queue, tmp_path: Path) -> None:
    """What the refusals above leave allowed: the name is replaced, the target untouched."""
    job = q.put(b"x")
    target = tmp_path / "target.db"
    target.write_bytes(b"old")
    (tmp_path / "to-file.db").symlink_to(target)
    (tmp_path / "dangling.db").symlink_to(tmp_path / "nowhere.db")
    for name in ("to-file.db", "dangling.db"):
        q.backup(tmp_path / name, force=True)
        assert not (tmp_path / name).is_symlink()
        with sqlq.Queue(tmp_path / name) as copy:
            assert copy.peek(job).body == b"x"  # type: ignore[union-attr]
    assert target.read_bytes() == b"old" and not (tmp_path / "nowhere.db").exists()


@pytest.mark.sqlite_only
def test_a_backup_inside_a_transaction_is_refused(q: sqlq.Queue, tmp_path: Path) -> None:
    with q.transaction(), pytest.raises(sqlq.Error, match="inside a transaction"):
        q.backup(tmp_path / "b.db")
    assert not (tmp_path / "b.db").exists()


def test_a_job_reserved_at_copy_time_comes_back(fq: sqlq.Queue, clock: FakeClock,
                                                 tmp_path: Path, backend: str) -> None:
    """The holder of a reservation works on the live queue, never on the copy: in a
    restored SQLite file its job comes back when its TTR runs out (the holder's owner
    file is not beside the copy, and only such a file proves a death); a PostgreSQL
    queue's copy has it ready at once, as `sqlq copy` moves it."""
    held = fq.put(b"held", ttr=30)
    assert fq.reserve(timeout=0).id == held  # type: ignore[union-attr]
    dest = tmp_path / "restored.db"
    fq.backup(dest)
    assert fq.peek(held).state == "reserved"  # type: ignore[union-attr]  # the live one
    with sqlq.Queue(dest, clock=clock) as restored:
        if is_postgres(backend):
            assert restored.peek(held).state == "ready"  # type: ignore[union-attr]
        else:
            assert restored.peek(held).state == "reserved"  # type: ignore[union-attr]
            assert restored.reserve(timeout=0) is None
            clock.advance(29.9)
            assert restored.reserve(timeout=0) is None
            clock.advance(0.2)
        job = restored.reserve(timeout=0)
        assert job is not None and (job.id, job.body) == (held, b"held")
        job.delete()


@pytest.mark.both_apis
def test_asyncqueue_backs_up_too(q: sqlq.Queue, tmp_path: Path) -> None:
    job = q.put(b"x")
    q.backup(tmp_path / "b.db")
    with sqlq.Queue(tmp_path / "b.db") as copy:
        assert copy.peek(job).body == b"x"  # type: ignore[union-attr]


def test_the_command(db_url: str, backend: str, tmp_path: Path) -> None:
    with sqlq.Queue(db_url) as queue:
        queue.put(b"x")
    run = CliRunner().invoke
    (tmp_path / "bk").mkdir()
    dest = str(tmp_path / "bk" / "b.db")
    result = run(cli, ["--db", db_url, "backup", dest, "--json"])
    assert result.exit_code == EXIT_OK, result.output
    out = json.loads(result.output)
    assert out["backup"] == dest and out["bytes"] == os.path.getsize(dest)
    check_copy(Path(dest))  # a PostgreSQL queue's copy is a SQLite file too
    again = run(cli, ["--db", db_url, "backup", dest])
    assert again.exit_code == EXIT_ERROR
    assert again.output == f"sqlq: {dest}: already exists (force=True, or sqlq backup " \
                           "--force, replaces it)\n"
    bad = run(cli, ["--db", db_url, "backup", str(tmp_path / "bk"), "--force"])
    assert (bad.exit_code, bad.output) == (EXIT_ERROR, f"sqlq: {tmp_path / 'bk'}: is a directory\n")
    assert os.listdir(tmp_path / "bk") == ["b.db"]
    os.mkfifo(tmp_path / "bk" / "fifo")
    node = run(cli, ["--db", db_url, "backup", str(tmp_path / "bk" / "fifo"), "--force"])
    assert (node.exit_code, node.output) == (
        EXIT_ERROR, f"sqlq: {tmp_path / 'bk' / 'fifo'}: is a FIFO, not a regular file; a "
                    "backup replaces only a regular file\n")
    os.unlink(tmp_path / "bk" / "fifo")
    forced = run(cli, ["--db", db_url, "backup", dest, "--force"])
    assert forced.exit_code == EXIT_OK, forced.output
    assert forced.output.startswith("backed up ")
    check_copy(Path(dest))
