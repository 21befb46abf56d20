"""``@q.periodic``: slots, and exactly one job per slot however many workers run.

The tests that start other processes, moved from tests/unit/test_periodic.py
(which keeps the in-process ones)."""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest

import sqlq
from tests.workers import Work, lines

pytestmark = [pytest.mark.timeout(60), pytest.mark.sql_ascii]


@pytest.mark.slow
def test_two_supervisors_on_one_file_enqueue_each_slot_once(db_url: str,
                                                             tmp_path: Path) -> None:
    ticks = tmp_path / "ticks"
    env = {"TICKS": str(ticks)}
    args = ("--import", "tests.periodic_jobs", "--processes", "2")
    with Work(db_url, *args, env=env) as a, Work(db_url, *args, env=env) as b:
        a.wait_log(" watching ", count=2, timeout=20)
        b.wait_log(" watching ", count=2, timeout=20)
        time.sleep(3.6)
        assert a.stop() == 0 and b.stop() == 0
    puts = re.findall(r"job (\d+) put for its slot at (\S+)", a.text() + b.text())
    slots = [slot for _, slot in puts]
    assert len(slots) >= 3, a.text() + b.text()
    assert len(set(slots)) == len(slots), slots  # no slot twice
    assert len(lines(ticks)) in (len(slots), len(slots) - 1)  # the last may not have run
    q = sqlq.Queue(db_url)
    assert q.stats()["current-jobs-buried"] == 0
    q.close()
