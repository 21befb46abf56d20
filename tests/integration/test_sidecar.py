"""The ``<db>-sqlq/`` sidecar: deleted, reached through a symlink, or left behind.

* Only an owner file that exists and can be locked proves its process dead: deleting
  the sidecar (``rm -rf``) under a live holder never hands its job to a second
  worker. The holder registers again under its token, so its jobs come back at once
  if it dies later; one that dies before that is recovered by the TTR.
* A database opened through a symlink to the file shares the sidecar and the wakeups
  of its real path, as SQLite shares the -wal.
* A blocking reserve after the sidecar was deleted makes it again; a kernel out of
  inotify watches makes it poll, with a warning, instead of raising.
* Owner files of processes that died holding nothing are removed.
* A -wal deleted under an open connection stops it with one clear error.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import logging
import os
import select
import shutil
import signal
import subprocess
import threading
import time
from pathlib import Path

import pytest

import sqlq
from sqlq.backends.sqlite import owners, wakeup
from tests.conftest import spawn
from tests.groups import wait_until

pytestmark = pytest.mark.sqlite_only  # the files beside a SQLite database

HOLDER = """
import sys, sqlq, sqlq.backends.sqlite.owners
sqlq.backends.sqlite.owners.OWNER_CHECK_S = 0  # look for its owner file at every touch
q = sqlq.Queue(sys.argv[1], durability="normal")
job = q.reserve("t", timeout=10)
print("held", job.id, q.backend.current_owner(), flush=True)
for line in sys.stdin:
    if line.strip() == "touch":
        job.touch()
        print("touched", flush=True)
    elif line.strip() == "delete":
        try:
            job.delete()
            print("deleted", flush=True)
        except sqlq.Error as e:
            print("lost", type(e).__name__, flush=True)
"""


def start_holder(path: str, ttr: float = 300) -> tuple[object, int, str]:
    with sqlq.Queue(path, durability="normal") as q:
        q.put(b"A", tube="t", ttr=ttr)
    holder = spawn(HOLDER, path, stdin=subprocess.PIPE)
    line = holder.stdout.readline().split()  # type: ignore[union-attr]
    assert line[0] == "held", line
    return holder, int(line[1]), line[2]


def ask(holder: object, command: str) -> str:
    holder.stdin.write(command + "\n")  # type: ignore[attr-defined]
    holder.stdin.flush()  # type: ignore[attr-defined]
    return str(holder.stdout.readline().strip())  # type: ignore[attr-defined]


def owner_file(path: str, token: str) -> Path:
    return Path(f"{path}-sqlq") / f"owner-{token}"


# -- F1: a deleted sidecar is not a death ------------------------------------------------------

def test_deleting_the_sidecar_does_not_hand_a_live_holders_job_to_another(db_path: str) -> None:
    holder, job_id, token = start_holder(db_path)
    try:
        shutil.rmtree(f"{db_path}-sqlq")
        with sqlq.Queue(db_path, durability="normal") as q:
            assert q.reserve("t", timeout=1.2) is None  # not stolen: the holder lives
            # A heartbeat (or its next reserve) registers the holder again, same token...
            assert ask(holder, "touch") == "touched"
            assert owner_file(db_path, token).exists()
            # ...so its death gives the job back at once again, not after the TTR.
            holder.kill()  # type: ignore[attr-defined]
            started = time.monotonic()
            job = q.reserve("t", timeout=30)
            assert job is not None and job.id == job_id
            assert time.monotonic() - started < 10
    finally:
        holder.kill()  # type: ignore[attr-defined]
        holder.wait()  # type: ignore[attr-defined]


def test_the_holder_finishes_its_job_after_the_sidecar_is_deleted(db_path: str) -> None:
    holder, _, _ = start_holder(db_path)
    try:
        shutil.rmtree(f"{db_path}-sqlq")
        with sqlq.Queue(db_path, durability="normal") as q:
            assert q.reserve("t", timeout=0) is None
        assert ask(holder, "delete") == "deleted"
    finally:
        holder.kill()  # type: ignore[attr-defined]
        holder.wait()  # type: ignore[attr-defined]


@pytest.mark.slow
def test_a_holder_that_dies_without_its_file_is_recovered_by_the_ttr(db_path: str) -> None:
    holder, job_id, _ = start_holder(db_path, ttr=2)
    shutil.rmtree(f"{db_path}-sqlq")
    holder.kill()  # type: ignore[attr-defined]
    holder.wait()  # type: ignore[attr-defined]
    with sqlq.Queue(db_path, durability="normal") as q:
        assert q.reserve("t", timeout=0) is None  # no proof of death: wait for the TTR
        job = q.reserve("t", timeout=30)
        assert job is not None and job.id == job_id


def test_a_close_that_cannot_release_leaves_proof_of_death(
        db_path: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """close() on a full disk cannot give its jobs back: it leaves its owner file unlocked
    (a missing one would prove nothing), so the next reserve anywhere takes them back."""
    with sqlq.Queue(db_path, durability="normal") as other:
        q = sqlq.Queue(db_path, durability="normal")
        q.put(b"x", ttr=300)
        assert q.reserve(timeout=0) is not None

        def full(*args: object, **kwargs: object) -> None:
            raise sqlq.DatabaseError(f"{db_path}: disk full, nothing was written")

        # The give-back's statement fails as on a full disk (the write itself goes on).
        monkeypatch.setattr(q.backend.store.claims, "release_owner", full)
        q.close()
        assert other.reserve(timeout=0) is not None


def test_only_an_existing_lockable_file_proves_death(tmp_path: Path) -> None:
    assert not owners.is_dead(str(tmp_path), "gone")
    (tmp_path / "owner-dead").write_text("pid 1\n")
    assert owners.is_dead(str(tmp_path), "dead")
    fd = os.open(tmp_path / "owner-live", os.O_RDWR | os.O_CREAT, 0o600)
    fcntl.flock(fd, fcntl.LOCK_EX)
    try:
        assert not owners.is_dead(str(tmp_path), "live")
    finally:
        os.close(fd)
    os.symlink(tmp_path / "owner-dead", tmp_path / "owner-link")
    assert not owners.is_dead(str(tmp_path), "link")  # never followed
    os.mkfifo(tmp_path / "owner-fifo")
    assert not owners.is_dead(str(tmp_path), "fifo")  # and never blocks


# -- F2: a symlink to the file -----------------------------------------------------------------

def test_a_symlinked_file_shares_owners_and_wakeups(tmp_path: Path) -> None:
    (tmp_path / "real").mkdir()
    (tmp_path / "other").mkdir()
    real = str(tmp_path / "real" / "q.db")
    link = tmp_path / "other" / "q.db"
    sqlq.Queue(real).close()
    link.symlink_to("../real/q.db")
    holder, _, _ = start_holder(str(link))
    try:
        with sqlq.Queue(real, durability="normal") as q:
            assert q.reserve("t", timeout=0.5) is None  # the holder is alive
    finally:
        holder.kill()  # type: ignore[attr-defined]
        holder.wait()  # type: ignore[attr-defined]
    assert not (tmp_path / "other" / "q.db-sqlq").exists()
    waiter = spawn("""
        import sys, time, sqlq
        q = sqlq.Queue(sys.argv[1], durability="normal")
        print("ready", flush=True)
        job = q.reserve("u", timeout=20)
        print("none" if job is None else time.time() - float(job.body), flush=True)
    """, str(link))
    assert waiter.stdout is not None
    assert waiter.stdout.readline().strip() == "ready"
    time.sleep(0.3)  # let it block: a put before that is found by its first look anyway
    with sqlq.Queue(real, durability="normal") as q:
        q.put(repr(time.time()), tube="u")
    late = waiter.stdout.readline().strip()
    waiter.wait(10)
    assert late != "none" and float(late) < 5.0, late  # was 30 s: the safety net


# -- F4: the sidecar deleted under a waiting queue, no inotify watch to spare ------------------

def test_a_blocking_reserve_after_the_sidecar_was_deleted(q: sqlq.Queue) -> None:
    assert q.reserve("t", timeout=0.05) is None  # the notifier watches the sidecar
    shutil.rmtree(f"{q.path}-sqlq")
    assert q.reserve("t", timeout=0.05) is None  # was FileNotFoundError
    assert os.path.isdir(f"{q.path}-sqlq")


def test_a_waiter_hears_of_a_death_after_the_sidecar_was_deleted(db_path: str) -> None:
    holder, job_id, token = start_holder(db_path)
    got: list[sqlq.Job | None] = []
    with sqlq.Queue(db_path, durability="normal") as q:
        waiting = threading.Thread(target=lambda: got.append(q.reserve("t", timeout=60)))
        waiting.start()
        try:
            time.sleep(0.3)  # let it block on its watches
            shutil.rmtree(f"{db_path}-sqlq")
            assert ask(holder, "touch") == "touched"
            assert owner_file(db_path, token).exists()
            started = time.monotonic()
            holder.kill()  # type: ignore[attr-defined]
            waiting.join(30)
            assert got and got[0] is not None and got[0].id == job_id
            assert time.monotonic() - started < 20  # not the 30 s safety net
        finally:
            holder.kill()  # type: ignore[attr-defined]
            holder.wait()  # type: ignore[attr-defined]
            waiting.join(60)


def readable(fd: int | None, timeout: float = 10.0) -> bool:
    assert fd is not None
    poller = select.poll()
    poller.register(fd, select.POLLIN)
    return bool(poller.poll(timeout * 1000))


def test_an_event_loop_watches_the_sidecar_made_again(q: sqlq.Queue) -> None:
    """The server only drains its notifier (the backend's, opened as ``sqlq serve``'s
    waiters open theirs): the drain itself must watch the new sidecar."""
    notifier = q.backend.open_notifier()
    try:
        shutil.rmtree(f"{q.path}-sqlq")
        assert readable(notifier.fileno())
        assert notifier.drain().owner  # an owner's exit may have gone unseen: look
        assert os.path.isdir(f"{q.path}-sqlq")
        with open(f"{q.path}-sqlq/owner-x", "w") as f:  # a process closing its owner file
            f.write("pid 1\n")
        assert readable(notifier.fileno()) and notifier.drain().owner
    finally:
        notifier.close()


def test_no_inotify_watch_to_spare_falls_back_to_polling(
        q: sqlq.Queue, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    assert q.reserve("t", timeout=0.01) is None  # the inotify notifier exists

    def refuse(self: wakeup.Notifier) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(wakeup.Notifier, "_watch", refuse)
    with caplog.at_level(logging.WARNING, logger="sqlq"):
        assert q.reserve("t", timeout=0.05) is None  # was a raw OSError
    assert "polling instead" in caplog.text
    with sqlq.Queue(q.path, durability="normal") as other:
        threading.Timer(0.2, lambda: other.put(b"x", tube="t")).start()
        job = q.reserve("t", timeout=20)
    assert job is not None and job.body == b"x"


# -- N3: files of owners that died holding nothing ---------------------------------------------

def test_owner_files_of_dead_processes_are_removed(db_path: str) -> None:
    sqlq.Queue(db_path).close()
    procs = [spawn("""
        import sys, sqlq
        q = sqlq.Queue(sys.argv[1], durability="normal")
        q.reserve(timeout=0)  # registers, holds nothing
        print(q.backend.current_owner(), flush=True)
        sys.stdin.read()
    """, db_path, stdin=subprocess.PIPE) for _ in range(3)]
    tokens = [p.stdout.readline().strip() for p in procs]  # type: ignore[union-attr]
    procs[0].send_signal(signal.SIGKILL)
    procs[1].send_signal(signal.SIGKILL)
    for p in procs[:2]:
        p.wait()
    stale_new = Path(f"{db_path}-sqlq") / "owner-123-abc.new"
    stale_new.write_text("pid 123\n")  # a process killed while registering
    os.utime(stale_new, (time.time() - 3600, time.time() - 3600))
    try:
        with sqlq.Queue(db_path, durability="normal") as q:
            q.reserve(timeout=0)
            left = {p.name for p in Path(f"{db_path}-sqlq").iterdir()}
            me = q.backend.current_owner()
            assert left == {"notify", f"owner-{tokens[2]}", f"owner-{me}"}
    finally:
        procs[2].kill()
        procs[2].wait()


# -- N5: the -wal deleted under an open connection ---------------------------------------------

@pytest.mark.parametrize("durability", ["full", "normal"])
def test_a_deleted_wal_stops_the_queue(db_path: str, durability: str) -> None:
    with sqlq.Queue(db_path, durability=durability) as q:  # type: ignore[arg-type]
        q.put(b"before")
        os.unlink(f"{db_path}-wal")
        with pytest.raises(sqlq.DatabaseError, match="-wal file was deleted") as info:
            for _ in range(200):  # normal durability looks once in a while
                q.put(b"lost on close")
        assert "\n" not in str(info.value) and db_path in str(info.value)
        with pytest.raises(sqlq.DatabaseError, match="-wal file was deleted"):
            q.put(b"refused")


def lose_wal(db_path: str, how: str) -> None:
    """Delete the -wal, or replace it with another file by a rename over it."""
    wal = f"{db_path}-wal"
    if how == "deleted":
        os.unlink(wal)
    else:
        Path(f"{wal}.new").write_bytes(b"")
        os.replace(f"{wal}.new", wal)


@pytest.mark.parametrize("how", ["deleted", "replaced"])
@pytest.mark.parametrize("settled", [False, True])
def test_full_mode_refuses_the_very_next_put_after_the_wal_goes(db_path: str, how: str,
                                                                 settled: bool) -> None:
    """In full mode no put is acknowledged into a lost -wal, whether the directory had just
    changed (the -wal made by the first commit: its time stamp may share the clock tick of
    the deletion) or had long been still (the check then starts from a stat of the
    directory, db.Database._check_wal_dir)."""
    with sqlq.Queue(db_path) as q:
        q.put(b"first")
        if settled:
            time.sleep(0.2)
            q.put(b"seen settled")
            q.put(b"again")
        lose_wal(db_path, how)
        with pytest.raises(sqlq.DatabaseError, match="-wal file was deleted or replaced"):
            q.put(b"lost on close")


@pytest.mark.parametrize("how", ["deleted", "replaced"])
def test_a_waiter_whose_watch_proved_the_wal_still_stops_when_it_goes(db_path: str,
                                                                      how: str) -> None:
    """A waiter's wakes skip the -wal check once its watch has seen the -wal stay put; its
    deletion or replacement (a rename over it) is itself an event, which checks again."""
    errors: list[BaseException] = []
    with sqlq.Queue(db_path, durability="normal") as q, \
            sqlq.Queue(db_path, durability="normal") as producer:
        got: list[sqlq.Job | None] = []

        def wait() -> None:
            try:
                while True:
                    got.append(q.reserve("t", timeout=20))
            except sqlq.DatabaseError as e:
                errors.append(e)

        waiting = threading.Thread(target=wait)
        waiting.start()
        for n in range(1, 3):  # two wakes: the first checks and proves, the second not
            time.sleep(0.1)  # let it block on its watches
            producer.put(b"x", tube="t")
            wait_until(lambda: len(got) == n, f"wake {n}")  # noqa: B023
        time.sleep(0.1)
        lose_wal(db_path, how)
        with contextlib.suppress(sqlq.Error), sqlq.Queue(db_path, durability="full") as other:
            other.put(b"x", tube="u")  # a commit: the waiter's event, if it had none
        waiting.join(30)
        assert errors and "-wal file was deleted or replaced" in str(errors[0])


def test_a_waiter_stops_when_the_wal_is_deleted(db_path: str) -> None:
    """A blocked reserve stops with the clear message at the next commit event (it got
    SQLite's bare "disk I/O error" before)."""
    errors: list[BaseException] = []
    with sqlq.Queue(db_path, durability="normal") as q:

        def wait() -> None:
            try:
                q.reserve("t", timeout=20)
            except sqlq.DatabaseError as e:
                errors.append(e)

        waiting = threading.Thread(target=wait)
        waiting.start()
        time.sleep(0.3)  # let it block on its watches
        os.unlink(f"{db_path}-wal")
        with contextlib.suppress(sqlq.Error), sqlq.Queue(db_path, durability="full") as other:
            other.put(b"x", tube="u")  # a commit (into a new -wal): the waiter's event
        waiting.join(30)
        assert errors and "-wal file was deleted" in str(errors[0])
