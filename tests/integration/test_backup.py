"""`sqlq backup` while another process keeps writing: every job acknowledged before the
backup began is in the copy, and the copy passes SQLite's integrity check."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import apsw
import pytest

import sqlq
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
                done = subprocess.run([sys.executable, "-m", "sqlq", "--db", db_url, "backup",
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
