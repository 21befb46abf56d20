"""The suite's own schedule (Makefile: ``--dist loadgroup``): the tests of an
``xdist_group`` run in one process, so a module-scoped fixture that is dear to start
(Chromium, the docs site's build) starts once. pytest 9.2 with xdist 3.8 split every
group without a word (each test went wherever a process was free) and the site was
built in three processes at once: this runs a small suite the same way and fails then."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

GROUPED = '''
import os

import pytest

pytestmark = pytest.mark.xdist_group("dear")


@pytest.mark.parametrize("i", range(6))
def test_one(i):
    with open(os.environ["PIDS"], "a") as f:
        f.write(f"{os.getpid()}\\n")
'''


def test_an_xdist_group_runs_in_one_process(tmp_path: Path) -> None:
    (tmp_path / "test_grouped.py").write_text(GROUPED)
    pids_file = tmp_path / "pids"
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", "3",
         "--dist", "loadgroup", "--basetemp", str(tmp_path / "base"),
         str(tmp_path / "test_grouped.py")],
        cwd=tmp_path, capture_output=True, text=True, timeout=120,
        env={**os.environ, "PIDS": str(pids_file)})
    assert run.returncode == 0, run.stdout + run.stderr
    pids = pids_file.read_text().split()
    assert len(pids) == 6, pids
    assert len(set(pids)) == 1, f"the group ran in {len(set(pids))} processes: {pids}"
