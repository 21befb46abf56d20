"""A worker stops cleanly (exit 0) on SIGTERM from the moment it says it is watching,
for both drivers: the asyncio worker's own handlers come with its event loop, a moment
after that line, and a SIGTERM in between used to kill it (exit -15)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

import sqlq
from tests import forkserver
from tests.timing import PATIENCE

TASKS = """
import os, sqlq
q = sqlq.Queue(os.environ["SQLQ_DB"])

@q.task(tube="sig")
def plain() -> None:
    pass

@q.task(tube="sig")
async def awaited() -> None:
    pass
"""


@pytest.mark.slow
@pytest.mark.parametrize("concurrency", ["1", "2"])  # 2: always the asyncio worker
def test_sigterm_right_after_the_watching_line_exits_0(tmp_path: Path,
                                                       concurrency: str) -> None:
    db = str(tmp_path / "q.db")
    sqlq.Queue(db).close()
    (tmp_path / "sig_tasks.py").write_text(TASKS)
    env = dict(os.environ, SQLQ_DB=db, PYTHONPATH=str(tmp_path))
    for _ in range(5):  # the window is short: a few tries, each at once after the line
        proc = forkserver.Popen(
            [sys.executable, "-m", "sqlq", "work", "--in-process", "--import", "sig_tasks",
             "--concurrency", concurrency, "--tube", "sig"],
            env=env, cwd=tmp_path, stderr=subprocess.PIPE, text=True)
        assert proc.stderr is not None
        seen = []
        for line in proc.stderr:
            seen.append(line)
            if "watching" in line:
                proc.send_signal(signal.SIGTERM)
                break
        rest = proc.communicate(timeout=PATIENCE)[1]
        assert proc.returncode == 0, "".join(seen) + rest
