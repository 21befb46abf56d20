"""An acknowledgement whose reply is lost after its commit (a pooler restarting, a link
dropped: tests/cutproxy.py) is made once more and finds its jobs gone. A delete (or a
complete) then asks the finished records whether its first attempt deleted them
(outcome done under the handle's reserves) and, if so, returns as if nothing had been
cut off; what no record settles raises ``JobLost`` with ``cut_off`` true. In every face
that acknowledges: a handle's delete and complete, ``delete_many``, and the worker that
logs them.

Before: ``delete_many``'s lost leases, returned rather than raised, became a plain
JobLost, and the prefetching worker logged each such job as lost to a TTR (the chaos
run's ``jobs-lost=2``, seed 2708736320 behind PgBouncer in session mode).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest

import sqlq
from sqlq.work.handling import JobHandling
from sqlq.work.prefetch import Done
from tests.cutproxy import CutProxy, cut_proxy
from tests.pgserver import PgServer


@pytest.fixture
def proxy(pg_server: PgServer) -> Iterator[CutProxy]:
    with cut_proxy("127.0.0.1", pg_server.port) as relay:
        yield relay


def _held(q: sqlq.Queue, n: int) -> list[sqlq.Job]:
    q.put_many([b"x"] * n, tube="t")
    jobs = q.reserve_many(n, "t", timeout=0)
    assert len(jobs) == n
    return jobs


def _done_by(q: sqlq.Queue, job: sqlq.Job) -> bool:
    record = q.finished(job.id)
    return record is not None and record.outcome == "done" and record.attempts == job.reserves


def test_a_batch_delete_whose_reply_is_lost_is_done(
        pg_server: PgServer, pg_url: str, proxy: CutProxy) -> None:
    with sqlq.Queue(proxy.url(pg_url, pg_server.port)) as q:
        jobs = _held(q, 3)
        proxy.cut_after(b"sqlq_delete_and_claim_many")
        q.delete_many(jobs)  # before: JobLost naming all three
        assert proxy.cuts == 1  # the first attempt committed, unseen
        assert all(j.state == "deleted" and q.peek(j.id) is None and _done_by(q, j)
                   for j in jobs)
        assert q.stats()["current-jobs-reserved"] == 0


def test_a_delete_whose_reply_is_lost_is_done(
        pg_server: PgServer, pg_url: str, proxy: CutProxy) -> None:
    with sqlq.Queue(proxy.url(pg_url, pg_server.port)) as q:
        [job] = _held(q, 1)
        proxy.cut_after(b"sqlq_jobs")  # the one statement of the delete
        job.delete()  # before: JobLost
        assert proxy.cuts == 1
        assert job.state == "deleted" and q.peek(job.id) is None and _done_by(q, job)


def test_a_complete_whose_reply_is_lost_is_done(
        pg_server: PgServer, pg_url: str, proxy: CutProxy) -> None:
    """A complete deletes its job with the same record as a delete, in the transaction
    that keeps the result: the record settles it as it settles a delete."""
    with sqlq.Queue(proxy.url(pg_url, pg_server.port)) as q:
        [job] = _held(q, 1)
        proxy.cut_after(b"sqlq_jobs")
        job.complete(b"result")  # before: JobLost, cut_off
        assert proxy.cuts == 1
        assert job.state == "deleted" and _done_by(q, job)
        assert q.result(job.id, timeout=0) == b"result"


def test_an_acknowledgement_no_record_settles_says_it_was_cut_off(
        pg_server: PgServer, pg_url: str, proxy: CutProxy) -> None:
    """A release keeps no record to ask (the job lives on, ready again, perhaps taken
    already): its JobLost says the first attempt may have been what ended the lease."""
    with sqlq.Queue(proxy.url(pg_url, pg_server.port)) as q:
        [job] = _held(q, 1)
        proxy.cut_after(b"sqlq_jobs")
        with pytest.raises(sqlq.JobLost) as info:
            job.release()
        assert proxy.cuts == 1
        assert info.value.cut_off and info.value.job_ids == (job.id,)
        assert "first attempt" in str(info.value)
        assert q.stats_job(job.id)["state"] == "ready"  # it had committed


def test_a_cut_off_delete_does_not_take_another_holders_delete_for_its_own(
        pg_server: PgServer, pg_url: str, proxy: CutProxy) -> None:
    """A claim a server crash undid (claims do not wait for the WAL flush) gives its
    reserve count to the next claim, another worker's, whose delete then writes the
    record the cut-off holder's delete reads: same count, another holder, not done.
    (CI109's PostgreSQL chaos run through PgBouncer: an async worker's claim of job 193
    was undone by an immediate restart; a prefetching worker claimed it with the same
    count and deleted it; the first worker's delete, cut off and made again, read that
    record and logged 193 done: "completed twice".)"""
    import psycopg

    with sqlq.Queue(proxy.url(pg_url, pg_server.port)) as q, sqlq.Queue(pg_url) as other:
        [job] = _held(q, 1)
        # The crash: the job as it was before the claim (ready, one reserve fewer).
        other.release(job.id)
        with psycopg.connect(pg_url, autocommit=True) as conn:
            conn.execute("UPDATE sqlq_jobs SET reserves = reserves - 1 WHERE id = %s",
                         (job.id,))
        again = other.reserve("t", timeout=0)
        assert again is not None and again.id == job.id and again.reserves == job.reserves
        again.delete()
        proxy.cut_after(b"sqlq_jobs")
        with pytest.raises(sqlq.JobLost) as info:
            job.delete()  # before: returned, as if its first attempt had deleted the job
        assert proxy.cuts == 1
        assert info.value.cut_off and info.value.job_ids == (job.id,)
        assert other.verbs.deleted_by([(again.id, again.reserves)]) == {again.id}
        assert q.verbs.deleted_by([(job.id, job.reserves)]) == set()


def test_a_lease_lost_without_a_cut_is_not_called_cut_off(pg_url: str) -> None:
    with sqlq.Queue(pg_url) as q:
        jobs = _held(q, 2)
        q.release(jobs[0].id)  # by id: the handle's lease is gone
        with pytest.raises(sqlq.JobLost) as info:
            q.delete_many(jobs)
        assert not info.value.cut_off and info.value.job_ids == (jobs[0].id,)


def test_the_worker_logs_a_cut_off_acknowledgement_as_done_not_lost(
        pg_server: PgServer, pg_url: str, proxy: CutProxy,
        caplog: pytest.LogCaptureFixture) -> None:
    """The prefetching worker's batch acknowledgement: before, each job was logged as
    "finished after its reservation was lost (TTR ran out) ... it runs again"."""
    with sqlq.Queue(proxy.url(pg_url, pg_server.port)) as q:
        jobs = _held(q, 2)
        handling = JobHandling(q, ["t"], prefetch=2)
        for job in jobs:
            handling.holding.finished(Done(job, "noop", 0.01, 0.0))
        proxy.cut_after(b"sqlq_delete_and_claim_many")
        with caplog.at_level(logging.INFO, logger="sqlq"):
            handling.ack()
        assert proxy.cuts == 1
        text = "\n".join(r.getMessage() for r in caplog.records)
        assert text.count(" noop done in ") == 2, text
        assert "reservation was lost" not in text and "cut off" not in text
        assert q.stats()["current-jobs-reserved"] == 0


def test_the_worker_whose_delete_and_claim_is_cut_off_logs_its_jobs_done(
        pg_server: PgServer, pg_url: str, proxy: CutProxy,
        caplog: pytest.LogCaptureFixture) -> None:
    """The worker's one commit a batch (its finished jobs deleted, the next claimed): cut
    off, it is not made again (a claim never is), and the worker deletes each job again.
    Those the cut commit had deleted are done, as their records say: before, each was
    logged as cut off, "deleted by that acknowledgement, or by another worker"."""
    with sqlq.Queue(proxy.url(pg_url, pg_server.port)) as q:
        jobs = _held(q, 2)
        q.put_many([b"next"] * 2, tube="t")
        handling = JobHandling(q, ["t"], prefetch=2)
        acks = [Done(job, "noop", 0.01, 0.0) for job in jobs]
        proxy.cut_after(b"sqlq_delete_and_claim_many")
        with caplog.at_level(logging.INFO, logger="sqlq"):
            assert handling.claim(2, 0, acks) == []  # the claim is lost with the cut
        assert proxy.cuts == 1
        text = "\n".join(r.getMessage() for r in caplog.records)
        assert text.count(" noop done in ") == 2, text
        assert "cut off" not in text and "reservation was lost" not in text, text
        assert all(_done_by(q, j) for j in jobs)
