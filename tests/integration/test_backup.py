"""`sqlq backup` while another process keeps writing: every job acknowledged before the
backup began is in the copy, and the copy passes SQLite's integrity check."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import apsw
import pytest

import sqlq
from tests import forkserver
from tests.conftest import ROOT, spawn
from tests.workers import wait_for

#: Puts into "kept" (never deleted: the id goes to the log once put() returned, that is
#: once acknowledged) and puts, reserves and deletes in "churn", until killed.
WRITER = """
import sys
import sqlq

q = sqlq.Queue(sys.argv[1])
with open(sys.argv[2], "a") as log:
    while True:
        log.write(f"{q.put(b'kept', tube='kept')}\\n")
        log.flush()
        q.put(b"churn", tube="churn")
        q.delete(q.reserve("churn", timeout=0).id)
"""


def acknowledged(log: Path) -> list[int]:
    return [int(line) for line in log.read_text().splitlines(keepends=True)
            if line.endswith("\n")]


@pytest.mark.slow
def test_backups_under_a_writer_hold_every_acknowledged_job(db_url: str,
                                                             tmp_path: Path) -> None:
    with sqlq.Queue(db_url, durability="normal") as q:
        q.put_many([b"x" * 100] * 3000, tube="bulk")  # enough that a copy takes a while
        log = tmp_path / "acked.log"
        log.touch()
        writer = spawn(WRITER, db_url, str(log))
        try:
            for n in range(3):
                goal = 20 * (n + 1)
                wait_for(lambda: len(acknowledged(log)) > goal, what="the writer")  # noqa: B023
                before = acknowledged(log)
                dest = tmp_path / f"backup-{n}.db"
                # Through the command, in its own process, as a cron job runs it.
                done = forkserver.run([sys.executable, "-m", "sqlq", "--db", db_url, "backup",
                                       str(dest)], capture_output=True, text=True, check=False,
                                      env={**os.environ, "PYTHONPATH": str(ROOT)})
                assert done.returncode == 0, done.stderr
                assert writer.poll() is None, writer.communicate()  # it wrote all along
                conn = apsw.Connection(str(dest))
                try:
                    assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
                finally:
                    conn.close()
                with sqlq.Queue(dest) as copy:
                    missing = [i for i in before if copy.peek(i) is None]
                    assert not missing, f"acknowledged before the backup, not in it: {missing}"
                    assert copy.stats_tube("bulk")["current-jobs-ready"] == 3000
            # The writer was never held up for long: it goes on after the last copy too.
            wait_for(lambda: len(acknowledged(log)) > len(before) + 20, what="the writer")
        finally:
            writer.kill()
            writer.communicate()


#: Reserves one job (TTR an hour), says which, and holds it until killed.
HOLDER = """
import sys, time
import sqlq

q = sqlq.Queue(sys.argv[1])
print(q.reserve(timeout=10).id, flush=True)
time.sleep(3600)
"""


@pytest.mark.sqlite_only
def test_a_restore_in_place_gives_a_dead_holders_job_back_at_once(db_path: str,
                                                                  tmp_path: Path) -> None:
    """Restored over the live file (app.db-sqlq/ kept), a job reserved at copy time by a
    holder killed since comes back at once, its hour-long TTR notwithstanding: its owner
    file is there, unlocked, which proves the death (owners.py)."""
    with sqlq.Queue(db_path) as q:
        job = q.put(b"held", ttr=3600)
    holder = spawn(HOLDER, db_path)
    try:
        assert holder.stdout is not None and int(holder.stdout.readline()) == job
        with sqlq.Queue(db_path) as q:
            q.backup(tmp_path / "copy.db")
    finally:
        holder.kill()
        holder.communicate()
    for suffix in ("-wal", "-shm"):  # the restore: the file replaced, sidecar kept
        Path(db_path + suffix).unlink(missing_ok=True)
    os.replace(tmp_path / "copy.db", db_path)
    with sqlq.Queue(db_path) as restored:
        assert restored.peek(job).state == "reserved"  # type: ignore[union-attr]
        got = restored.reserve(timeout=0)
        assert got is not None and got.id == job


#: Puts 300 jobs (durability full: each acknowledged once put() returned), says so, and
#: stays, its commits in the -wal (the reliability report's W7 reproduction).
HOLDS_WAL = """
import sys, time
import sqlq

q = sqlq.Queue(sys.argv[1], durability="full")
print(",".join(str(q.put(b"v", tube="v")) for _ in range(300)), flush=True)
time.sleep(3600)
"""


@pytest.mark.sqlite_only
def test_backup_force_onto_the_live_wal_is_refused_and_loses_nothing(db_path: str) -> None:
    """`sqlq backup DB-wal --force` beside a writer holding 300 acknowledged puts in its
    -wal: refused in one line, exit 1, and after the writer is SIGKILLed all 300 are
    there (before the fix the -wal was replaced by the copy: 300 of 300 lost)."""
    with sqlq.Queue(db_path):
        pass  # the file, made before the writer opens it
    writer = spawn(HOLDS_WAL, db_path)
    try:
        assert writer.stdout is not None
        acked = [int(i) for i in writer.stdout.readline().split(",")]
        assert len(acked) == 300 and os.path.getsize(db_path + "-wal") > 0
        done = forkserver.run([sys.executable, "-m", "sqlq", "--db", db_path, "backup",
                               db_path + "-wal", "--force"], capture_output=True, text=True,
                              check=False, env={**os.environ, "PYTHONPATH": str(ROOT)})
        assert (done.returncode, done.stdout) == (1, "")
        assert done.stderr == (f"sqlq: {db_path}-wal: is the queue's own -wal file\n")
    finally:
        writer.kill()
        writer.communicate()
    with sqlq.Queue(db_path) as q:
        assert [i for i in acked if q.peek(i) is None] == []
