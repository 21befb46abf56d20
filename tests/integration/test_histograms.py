"""``sqlq_job_wait_seconds`` and ``sqlq_job_run_seconds``: what real ``sqlq work`` processes
observed, read back through ``/metrics`` with prometheus-client's own parser.

The tests that start other processes, moved from tests/unit/test_histograms.py
(which keeps the in-process ones)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

import sqlq
from sqlq.histograms import LABELS
from tests import jobs
from tests.unit.test_histograms import Samples, count, scrape
from tests.workers import Work, wait_for

pytestmark = pytest.mark.timeout(90)


def enqueue(q: sqlq.Queue, task: Any, *args: Any, delay: float = 0.0) -> int:
    return q.put(task.message(*args), tube=task.tube, priority=task.priority, ttr=task.ttr,
                 delay=delay)


def bucket(samples: Samples, metric: str, tube: str, le: str) -> float:
    return samples[f"sqlq_job_{metric}_seconds_bucket", (("le", le), ("tube", tube))]


def total(samples: Samples, metric: str, tube: str) -> float:
    return samples[f"sqlq_job_{metric}_seconds_sum", (("tube", tube),)]


@pytest.mark.slow
@pytest.mark.sql_ascii
def test_two_workers_add_up_waits_and_runs(q: sqlq.Queue, db_url: str,
                                           tmp_path: Path) -> None:
    workers = [Work(db_url, "--import", "tests.jobs", "--log-format", "json")
               for _ in range(2)]
    try:
        for w in workers:
            w.wait_log("watching")
        naps = [enqueue(q, jobs.nap, str(tmp_path / "naps"), 0.3) for _ in range(6)]
        noops = [enqueue(q, jobs.noop) for _ in range(10)]
        failing = enqueue(q, jobs.fail, str(tmp_path / "fail"), "no")  # 3 runs, then buried
        put_at = time.monotonic()
        delayed = [enqueue(q, jobs.record, str(tmp_path / "rec"), "x", delay=3.0)
                   for _ in range(4)]
        wait_for(lambda: all(q.peek(j) is None for j in naps + noops + delayed),
                 timeout=30, what="every job to run")
        wait_for(lambda: (j := q.peek(failing)) and j.state == "buried", what="the burial")
        assert time.monotonic() - put_at >= 3.0
        for w in workers:
            assert w.stop() == 0, w.text()
    finally:
        for w in workers:
            if w.proc.poll() is None:
                w.stop()
    # Both processes ran jobs, and what each observed was added up.
    ran_by = [sum(1 for r in w.records() if r.get("outcome") in ("done", "retry", "buried"))
              for w in workers]
    assert all(ran_by) and sum(ran_by) == 6 + 10 + 3 + 4, ran_by

    samples, types = scrape(q)
    assert types["sqlq_job_wait_seconds"] == types["sqlq_job_run_seconds"] == "histogram"
    # Runs: every run, whatever its outcome (the failing job's three included).
    assert count(samples, "run", "slow") == 6
    assert count(samples, "run", "default") == 10
    assert count(samples, "run", "jobs") == 4 + 3
    assert bucket(samples, "run", "slow", "0.25") == 0  # each nap sleeps 0.3 s
    assert bucket(samples, "run", "slow", "5.0") == 6
    assert 6 * 0.3 <= total(samples, "run", "slow") < 6 * 5
    assert bucket(samples, "run", "default", "1.0") == 10
    # Waits: first reservations only (the retries of the failing job are not counted),
    # a delayed job's counted from its due time: 3 s after its put, waits stay far below.
    assert count(samples, "wait", "default") == 10
    assert count(samples, "wait", "slow") == 6
    assert count(samples, "wait", "jobs") == 4 + 1
    assert bucket(samples, "wait", "jobs", "2.5") == 5
    assert total(samples, "wait", "jobs") < 5 * 2.5
    # Buckets are cumulative, +Inf equals the count.
    for metric, tube in (("run", "slow"), ("wait", "jobs"), ("run", "jobs")):
        values = [bucket(samples, metric, tube, le) for le in LABELS]
        assert values == sorted(values) and values[-1] == count(samples, metric, tube)


@pytest.mark.slow  # not on SQL_ASCII as well: a wait on the clock, no text read back
def test_a_running_worker_flushes_within_ten_seconds(q: sqlq.Queue, db_url: str) -> None:
    with Work(db_url, "--import", "tests.jobs") as w:
        w.wait_log("watching")
        enqueue(q, jobs.noop)
        w.wait_log("done")
        started = time.monotonic()
        wait_for(lambda: count(scrape(q)[0], "run", "default") == 1, timeout=20,
                 what="the run in /metrics while the worker runs")
        assert time.monotonic() - started < 15
        assert count(scrape(q)[0], "wait", "default") == 1
        assert w.stop() == 0
    assert count(scrape(q)[0], "run", "default") == 1  # the last flush added nothing twice


@pytest.mark.sql_ascii
def test_a_command_worker_records_too(q: sqlq.Queue, db_url: str) -> None:
    for _ in range(2):
        q.put(b"x", tube="cmd")
    with Work(db_url, "--tube", "cmd", "--burst", "--", "sleep", "0.3") as w:
        assert w.wait() == 0, w.text()
    samples, _ = scrape(q)
    assert count(samples, "run", "cmd") == 2 and count(samples, "wait", "cmd") == 2
    assert bucket(samples, "run", "cmd", "0.25") == 0 and bucket(samples, "run", "cmd", "5.0") == 2


@pytest.mark.sql_ascii
def test_an_async_worker_records_too(q: sqlq.Queue, db_url: str, tmp_path: Path) -> None:
    from tests import ajobs

    for _ in range(3):
        enqueue(q, ajobs.nap, str(tmp_path / "runs"), 0.3)
    with Work(db_url, "--import", "tests.ajobs", "--concurrency", "3", "--burst") as w:
        assert w.wait() == 0, w.text()
    samples, _ = scrape(q)
    tube = ajobs.nap.tube
    assert count(samples, "run", tube) == 3 and count(samples, "wait", tube) == 3
    assert bucket(samples, "run", tube, "0.25") == 0
