"""``sqlq work --concurrency N --prefetch``: the event-loop worker claims a batch per commit,
with the TTR, stop and SIGKILL promises of one job at a time (real worker processes running
tests/ajobs.py on both backends, as test_aworker; one in-process run counts the commits)."""

from __future__ import annotations

import signal
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

import sqlq
from sqlq.work.aworker import AsyncWorker
from sqlq.work.taskrun import TaskRunner
from tests import ajobs
from tests.timing import soon
from tests.workers import Work, killed_holder_gives_back, lines, wait_for

pytestmark = pytest.mark.timeout(60)


def enqueue(q: sqlq.Queue, task: Any, *args: Any) -> int:
    return q.put(task.message(*args), tube=task.tube, priority=task.priority, ttr=task.ttr)


def held_at_start(runs: Path) -> int:
    """The most jobs reserved (in the whole database) as any recorded job started."""
    fields = [line.split() for line in lines(runs)]
    return max(int(f[1]) for f in fields if f[0] != "end" and f[1] != "-")


def test_a_claim_fills_the_slots_and_the_batch_and_deletes_the_finished_jobs(
        q: sqlq.Queue, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    runs = tmp_path / "runs"
    ids = [enqueue(q, ajobs.record, str(runs), f"r{i}") for i in range(40)]
    squared = enqueue(q, ajobs.square, 6)
    calls: list[tuple[str, int, int]] = []  # (verb, jobs deleted, jobs claimed)
    reserve, reserve_many, delete_many = q.reserve, q.reserve_many, q.delete_many

    def counted_reserve(*args: Any, delete: sqlq.Job | None = None,
                        **kwargs: Any) -> sqlq.Job | None:
        got = reserve(*args, delete=delete, **kwargs)
        calls.append(("reserve", int(delete is not None), int(got is not None)))
        return got

    def counted_many(n: int, *args: Any, delete: list[sqlq.Job] | None = None,
                     **kwargs: Any) -> list[sqlq.Job]:
        got = reserve_many(n, *args, delete=delete, **kwargs)
        calls.append(("reserve_many", len(delete or []), len(got)))
        return got

    def counted_delete_many(jobs: list[sqlq.Job]) -> None:
        delete_many(jobs)
        calls.append(("delete_many", len(jobs), 0))

    job_delete = sqlq.Job.delete

    def counted_delete(job: sqlq.Job) -> None:
        job_delete(job)
        calls.append(("delete", 1, 0))

    monkeypatch.setattr(sqlq.Job, "delete", counted_delete)
    q.reserve = counted_reserve  # type: ignore[method-assign]
    q.reserve_many = counted_many  # type: ignore[method-assign]
    q.delete_many = counted_delete_many  # type: ignore[method-assign]
    worker = AsyncWorker(q, TaskRunner(), ["batch", "async"], concurrency=4, burst=True,
                         prefetch=10)
    assert worker.run() == 41
    worker.close()
    assert sorted(x.split()[0] for x in lines(runs)) == sorted(f"r{i}" for i in range(40))
    assert all(q.peek(i) is None for i in ids)
    assert q.result(squared, timeout=0) == b"36"  # a result is stored at once, as ever
    # The first claim fills the 4 slots and a batch of 10 less one; every job is claimed
    # by a few claims, and the no-op ones deleted together (with a claim, or by the last
    # delete_many), not one commit each.
    assert calls[0] == ("reserve_many", 0, 13), calls
    assert sum(claimed for _, _, claimed in calls) == 41, calls
    assert sum(deleted for _, deleted, _ in calls) == 40, calls
    assert len(calls) <= 12, calls


def test_processes_drain_exactly_once_holding_batches(q: sqlq.Queue, db_url: str,
                                                      tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    for i in range(300):  # one job in ten counts the jobs reserved as it runs
        enqueue(q, ajobs.record, str(runs), f"r{i}", i % 10 == 9)
    with Work(db_url, "--import", "tests.ajobs", "--processes", "2", "--concurrency", "4",
              "--burst") as w:
        assert w.wait(40) == 0, w.text()
    tags = Counter(line.split()[0] for line in lines(runs))
    assert tags == Counter(f"r{i}" for i in range(300)), tags.most_common(3)
    assert q.stats()["current-jobs-ready"] == q.stats()["current-jobs-reserved"] == 0
    # The adaptive default held batches: more jobs reserved than the 2 x 4 slots.
    assert held_at_start(runs) > 8, lines(runs)[:20]


@pytest.mark.slow
def test_jobs_held_in_a_batch_are_touched_and_each_runs_once_within_its_ttr(
        q: sqlq.Queue, db_url: str, tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    ids = [enqueue(q, ajobs.held, str(runs), 1.2) for _ in range(7)]  # ttr=3
    with Work(db_url, "--import", "tests.ajobs", "--concurrency", "2", "--prefetch", "6",
              "--burst", "--log-level", "DEBUG") as w:
        assert w.wait(40) == 0, w.text()
    # 2 slots + 5 held: the 7th starts ~3.6 s after its claim, past its 3 s TTR.
    assert held_at_start(runs) == 7, lines(runs)
    assert [x.split()[0] for x in lines(runs)].count("start") == 7, lines(runs)
    assert all(q.peek(jid) is None for jid in ids), w.text()
    text = w.text()
    assert "touched (waiting in a prefetched batch)" in text, text
    assert "lost" not in text and "cancelled" not in text and "past its TTR" not in text, text


@pytest.mark.slow
def test_sigterm_releases_the_batch_at_once_and_finishes_the_running_jobs(
        q: sqlq.Queue, db_url: str, tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    ids = [enqueue(q, ajobs.nap, str(runs), 4.0) for _ in range(6)]  # ttr=30
    with Work(db_url, "--import", "tests.ajobs", "--concurrency", "2", "--prefetch", "4") as w:
        wait_for(lambda: len(lines(runs)) == 2, what="two jobs to start")
        started = [jid for jid in ids if q.stats_job(jid)["state"] == "reserved"]
        assert len(started) == 5  # 2 running, 3 held (the sixth left to others)
        w.signal(signal.SIGTERM)
        stopped = time.monotonic()

        def given_back() -> list[sqlq.Job]:
            back = [q.peek(jid) for jid in ids]
            return [j for j in back if j is not None and j.releases == 1]

        wait_for(lambda: len(given_back()) == 3, what="the held jobs to be released")
        # At once: not after the running jobs (4 s), and not after a TTR (30 s).
        assert time.monotonic() - stopped < soon(0.5)
        assert all(j.state == "ready" and j.reserves == 1 for j in given_back())
        assert w.wait() == 0, w.text()
    assert [x.split()[0] for x in lines(runs)] == ["start"] * 2 + ["end"] * 2
    assert sum(q.peek(jid) is None for jid in ids) == 2  # the running ones, done
    assert w.text().count("released: the worker is stopping") == 3
    assert q.stats()["current-jobs-reserved"] == 0


def test_sigkill_gives_the_held_batch_back_at_once(q: sqlq.Queue, db_url: str,
                                                  tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    ids = [q.put(ajobs.nap.message(str(runs), 30.0), tube="async", ttr=60) for _ in range(5)]
    with Work(db_url, "--import", "tests.ajobs", "--concurrency", "2", "--prefetch", "4",
              "--in-process") as w:
        wait_for(lambda: len(lines(runs)) == 2, what="two jobs to start")
        assert q.stats()["current-jobs-reserved"] == 5  # 2 running, 3 held
        killed_holder_gives_back(w, q, "async", ids)
