"""A process a test starts through tests/orphans.py dies with the test's process."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import sqlq
from tests.conftest import ROOT
from tests.workers import alive, wait_for

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"),
                                reason="PR_SET_PDEATHSIG is Linux's")

#: A middle process starts a blocking `sqlq reserve` through tests/orphans.py, says its
#: pid, and waits to be killed.
MIDDLE = """
import subprocess, sys, time
from tests import orphans
child = subprocess.Popen(orphans.command("-m", "sqlq", "--db", sys.argv[1], "reserve",
                                         "--timeout", "60"))
print(child.pid, flush=True)
time.sleep(60)
"""


def test_a_child_dies_when_the_process_that_started_it_is_killed(tmp_path: Path) -> None:
    sqlq.Queue(str(tmp_path / "q.db")).close()
    middle = subprocess.Popen([sys.executable, "-c", MIDDLE, str(tmp_path / "q.db")],
                              stdout=subprocess.PIPE, text=True, cwd=ROOT,
                              env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert middle.stdout is not None
    child = int(middle.stdout.readline())
    try:
        # Killed before or after the child's prctl: either way it must not outlive it.
        assert alive(child)
        middle.kill()
        middle.wait()
        wait_for(lambda: not alive(child), what="the orphan's death")
    finally:
        middle.kill()
        middle.wait()
        if alive(child):
            os.kill(child, 9)


def test_a_child_whose_parent_is_already_gone_exits() -> None:
    """The parent died before the child asked for the signal: it exits at once."""
    gone = subprocess.run([sys.executable, "-m", "tests.orphans", "1", "-m", "this"],
                          cwd=ROOT, capture_output=True, timeout=60)
    assert gone.returncode == 1 and not gone.stdout
