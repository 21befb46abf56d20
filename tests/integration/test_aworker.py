"""``sqlq work`` with ``async def`` tasks: real worker processes running tests/ajobs.py on an
event loop, ``--concurrency`` jobs at once."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

import sqlq
from tests import ajobs
from tests.workers import Work, lines, wait_for

pytestmark = pytest.mark.timeout(60)


def enqueue(q: sqlq.Queue, task: Any, *args: Any) -> int:
    return q.put(task.message(*args), tube=task.tube, priority=task.priority, ttr=task.ttr)


@pytest.mark.slow
def test_jobs_run_concurrently_with_results_retries_and_plain_tasks(
        q: sqlq.Queue, db_url: str, tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    naps = [enqueue(q, ajobs.nap, str(runs), 1.0) for _ in range(5)]
    squared = enqueue(q, ajobs.square, 7)
    plain = enqueue(q, ajobs.plain, 1)
    failing = enqueue(q, ajobs.fail, "bad input 42")
    with Work(db_url, "--import", "tests.ajobs", "--concurrency", "8", "--burst") as w:
        assert w.wait(30) == 0, w.text()
    assert all(q.peek(jid) is None for jid in naps)
    events = [x.split()[0] for x in lines(runs)]
    assert events.count("end") == 5
    # Concurrent: every nap started before the first one ended. (Not a bound on the time
    # taken: on a busy machine the worker's start-up alone can take seconds.)
    assert events[:5] == ["start"] * 5, f"the naps ran one after another: {events}"
    assert q.result(squared, timeout=0) == b"49"
    assert q.result(plain, timeout=0) == b"2"
    job = q.peek(failing)
    assert job is not None and job.state == "buried" and job.reserves == 2
    assert job.bury_reason == "ValueError: bad input 42"
    assert "asyncio" in w.text()


@pytest.mark.slow
def test_a_task_past_its_ttr_is_cancelled_and_buried_with_the_reason(
        q: sqlq.Queue, db_url: str, tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    jid = enqueue(q, ajobs.overrun, str(runs))
    with Work(db_url, "--import", "tests.ajobs") as w:
        wait_for(lambda: (j := q.peek(jid)) and j.state == "buried", timeout=20,
                 what="the burial")
        assert w.stop() == 0, w.text()
    job = q.peek(jid)
    assert job is not None and job.timeouts == 0 and job.reserves == 1
    assert job.bury_reason == "cancelled: still running when its TTR of 2s ran out"
    assert lines(runs)[-1] == "cancelled"


@pytest.mark.slow
def test_keepalive_touches_a_long_task(q: sqlq.Queue, db_url: str, tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    jid = enqueue(q, ajobs.kept, str(runs), 4.5)  # ttr=4: touched 3.2 s in
    with Work(db_url, "--import", "tests.ajobs", "--concurrency", "2", "--processes", "2") as w:
        wait_for(lambda: q.peek(jid) is None, timeout=20, what="the long job to finish")
        assert w.stop() == 0
    assert [x.split()[0] for x in lines(runs)] == ["start", "end"]


@pytest.mark.slow
def test_sigterm_finishes_within_the_grace_and_releases_the_rest(
        q: sqlq.Queue, db_url: str, tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    short = enqueue(q, ajobs.nap, str(runs), 1.0)
    long = enqueue(q, ajobs.nap, str(runs), 30.0)
    with Work(db_url, "--import", "tests.ajobs", "--concurrency", "4", "--grace", "2") as w:
        wait_for(lambda: len(lines(runs)) == 2, what="both jobs to start")
        started = time.monotonic()
        assert w.stop() == 0, w.text()
        took = time.monotonic() - started
    assert 1.5 < took < 8, took
    assert q.peek(short) is None  # finished within the grace period
    job = q.peek(long)
    assert job is not None and job.state == "ready" and job.releases == 1
    assert "the grace period ran out" in w.text()
    assert "cancelled" in lines(runs)
    assert q.stats()["current-jobs-reserved"] == 0  # no lease left behind, idle slots included
