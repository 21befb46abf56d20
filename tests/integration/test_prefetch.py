"""``sqlq work --prefetch``: batches claimed in one commit, with the TTR, stop and SIGKILL
promises of one job at a time (real worker processes on both backends, as test_worker)."""

from __future__ import annotations

import signal
import time
from pathlib import Path

import pytest

import sqlq
from sqlq.work.prefetch import BATCH_BUDGET, MAX_PREFETCH, BatchSize
from sqlq.work.taskrun import TaskRunner
from sqlq.work.worker import Worker
from tests import jobs
from tests.workers import Work, killed_holder_gives_back, lines, wait_for

pytestmark = pytest.mark.timeout(60)


def test_a_batch_is_claimed_and_its_finished_jobs_deleted_in_one_commit(q: sqlq.Queue) -> None:
    ids = [q.put(jobs.noop.message()) for _ in range(25)]
    added = q.put(jobs.add.message(2, 3))
    claims: list[tuple[int, int]] = []  # (jobs deleted, jobs claimed) per reserve_many
    reserve_many = q.reserve_many

    def counted(n: int, *args: object, delete: list[sqlq.Job] | None = None,
                **kwargs: object) -> list[sqlq.Job]:
        got = reserve_many(n, *args, delete=delete, **kwargs)  # type: ignore[arg-type]
        claims.append((len(delete or []), len(got)))
        return got

    q.reserve_many = counted  # type: ignore[method-assign]
    worker = Worker(q, TaskRunner(), ["default"], burst=True, prefetch=10)
    assert worker.run() == 26
    worker.close()
    assert all(q.peek(i) is None for i in ids)
    assert q.result(added, timeout=0) == b"5"  # a result is stored at once, as ever
    # 10 + 10 + 6 claimed; each claim deleted the finished ones of the batch before.
    assert claims[:3] == [(0, 10), (10, 10), (10, 6)], claims
    assert sum(deleted for deleted, _ in claims) == 25  # the noop jobs; add's is stored
    assert len(claims) <= 5, claims


def test_the_default_grows_for_short_jobs_and_stays_at_one_for_long_ones() -> None:
    fast = BatchSize()
    assert fast.next() == 1  # nothing measured yet: one at a time
    fast.observe(0.00005)
    assert [fast.next() for _ in range(8)] == [2, 4, 8, 16, 32, 64, 64, 64]
    assert MAX_PREFETCH == 64
    for _ in range(20):
        fast.observe(0.001)  # 1 ms jobs: about BATCH_BUDGET of them per claim
    assert fast.next() == int(BATCH_BUDGET / 0.001)
    fast.observe(0.5)  # one slow job shrinks the batch at once
    assert fast.next() == 1
    assert BatchSize(7).next() == 7


def test_sigterm_releases_a_batch_that_would_take_long_at_once(q: sqlq.Queue, db_url: str,
                                                               tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    ids = [q.put(jobs.nap.message(str(runs), 1.0), tube="slow", ttr=30) for _ in range(4)]
    with Work(db_url, "--import", "tests.jobs", "--prefetch", "4", "--in-process") as w:
        wait_for(lambda: lines(runs), what="the first job to start")
        stopped = time.monotonic()
        w.signal(signal.SIGTERM)
        assert w.wait() == 0, w.text()
        assert time.monotonic() - stopped < 5
    assert len(lines(runs)) == 2  # the running job finished; no other started
    assert q.peek(ids[0]) is None
    for jid in ids[1:]:
        job = q.peek(jid)
        assert job is not None and job.state == "ready", w.text()  # no delay, no TTR wait
        assert (job.reserves, job.releases) == (1, 1)
    assert w.text().count("released: the worker is stopping") == 3


def test_sigterm_finishes_a_batch_of_short_jobs(q: sqlq.Queue, db_url: str,
                                                tmp_path: Path) -> None:
    ran = tmp_path / "ran"
    batch = [q.put(jobs.stop_me.message(str(ran)), tube="jobs")]
    batch += [q.put(jobs.record.message(str(ran), f"r{i}"), tube="jobs") for i in range(3)]
    after = q.put(jobs.record.message(str(ran), "after"), tube="jobs")
    with Work(db_url, "--import", "tests.jobs", "--prefetch", "4", "--in-process") as w:
        assert w.wait() == 0, w.text()
    assert lines(ran)[1:] == ["r0", "r1", "r2"], lines(ran)
    assert all(q.peek(jid) is None for jid in batch)  # run and deleted: no release counted
    job = q.peek(after)  # not in the batch: never reserved
    assert job is not None and job.state == "ready" and job.reserves == 0
    assert "released" not in w.text()


def test_sigkill_gives_the_whole_batch_back_at_once(q: sqlq.Queue, db_url: str,
                                                    tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    ids = [q.put(jobs.nap.message(str(runs), 5.0), tube="slow", ttr=60) for _ in range(4)]
    with Work(db_url, "--import", "tests.jobs", "--prefetch", "4", "--in-process") as w:
        wait_for(lambda: lines(runs), what="the first job to start")
        killed_holder_gives_back(w, q, "slow", ids)


@pytest.mark.slow
def test_a_job_held_in_a_batch_keeps_its_ttr_and_starts_with_most_of_it(
        q: sqlq.Queue, db_url: str, tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    ids = [q.put(jobs.slow.message(str(runs), 0.6), tube="slow", ttr=1) for _ in range(3)]
    with Work(db_url, "--import", "tests.jobs", "--prefetch", "3", "--burst",
              "--in-process") as w:
        assert w.wait() == 0, w.text()
    # 1.8 s of work claimed at once with a 1 s TTR: each ran once, within its TTR.
    assert len([x for x in lines(runs) if x.startswith("start")]) == 3, lines(runs)
    assert all(q.peek(jid) is None for jid in ids), w.text()
    assert "lost" not in w.text() and "past its TTR" not in w.text(), w.text()
