"""The suite's own schedule (Makefile: ``--dist loadgroup``): the tests of an
``xdist_group`` run in one process, so a module-scoped fixture that is dear to start
(Chromium, the docs site's build) starts once. pytest 9.2 with xdist 3.8 split every
group without a word (each test went wherever a process was free) and the site was
built in three processes at once: this runs a small suite the same way and fails then.
And the slow tests come first, one module's after another's in turn (conftest.py)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import in_turn

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


def test_slow_tests_are_taken_from_each_module_in_turn() -> None:
    assert in_turn([["a1", "a2", "a3"], ["b1"], ["c1", "c2"]]) == [
        "a1", "c1", "a2", "b1", "c2", "a3"]
    many = in_turn([[f"a{i}" for i in range(8)], ["b0", "b1"]])  # spread, not left at the end
    assert many.index("b0") in (1, 2) and many.index("b1") in (5, 6, 7), many
    assert in_turn([]) == []


def test_this_run_begins_with_its_slow_tests_in_turn(request: pytest.FixtureRequest) -> None:
    """As collected for this run (by each xdist process alike): every slow test before
    the others, and each module's slow tests spread over them (in the last quarter of
    them, no more than a quarter of a module's, and one)."""
    items = request.session.items
    slow = [item for item in items if item.get_closest_marker("slow")]
    assert items[:len(slow)] == slow
    where: dict[str, list[int]] = {}
    for position, item in enumerate(slow):
        where.setdefault(item.nodeid.partition("::")[0], []).append(position)
    packed = {m: at for m, at in where.items()
              if sum(p >= 0.75 * len(slow) for p in at) > len(at) / 4 + 1}
    assert not packed, packed
