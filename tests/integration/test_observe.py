"""The read-only views behind the dashboard and /metrics (sqlq/observe.py).

The tests that start other processes, moved from tests/unit/test_observe.py
(which keeps the in-process ones)."""

from __future__ import annotations

import pytest

import sqlq
from tests.conftest import spawn

# q and fq: as a Queue, then as an AsyncQueue
pytestmark = [pytest.mark.both_apis, pytest.mark.sql_ascii]


def test_counters_outlive_jobs_and_processes(q: sqlq.Queue, db_url: str) -> None:
    """Buries and kicks are counted in the file: another process's count, after the jobs
    are deleted, is still there."""
    child = spawn("""
        import sys, sqlq
        q = sqlq.Queue(sys.argv[1], durability="normal")
        for _ in range(3):
            q.put("x", tube="t")
            q.reserve("t", timeout=0).bury()
        q.kick(2, "t")
        q.close()
    """, db_url)
    assert child.wait(60) == 0, child.stderr.read() if child.stderr else ""
    for job_id in range(1, 4):
        q.delete(job_id)
    t = q.views.tube_summary("t")
    assert (t.buries_total, t.kicks_total, t.live) == (3, 2, 0)
    overview = q.views.overview()
    assert overview.puts_total == 3 and overview.deletes_total == 3
