"""The record of finished jobs (issue 39): every way a job ends leaves one, written with
the end itself, read by ``q.finished``; ``peek`` and ``stats_job`` still say "not found";
retention per tube and overall, by age and count. On every backend and both APIs."""

from __future__ import annotations

import threading
from typing import Any

import pytest

import sqlq
from sqlq.finished import BODY_HEAD, Finished
from tests.timing import FakeClock

pytestmark = [pytest.mark.both_apis, pytest.mark.sqlite3_driver]


def _reserve(q: sqlq.Queue, tube: str = "default") -> sqlq.Job:
    job = q.reserve(tube, timeout=0)
    assert job is not None
    return job


def _sync(q: Any) -> sqlq.Queue:
    """The Queue itself, also under an AsyncQueue bridge."""
    aq = getattr(q, "aq", None)
    return q if aq is None else aq.queue  # type: ignore[no-any-return]


def _record(q: sqlq.Queue, job_id: int) -> Finished:
    record = q.finished(job_id)
    assert record is not None, f"job {job_id} left no record"
    return record


def test_a_job_deleted_after_its_run_is_done(fq: sqlq.Queue, clock: FakeClock) -> None:
    jid = fq.put(b'{"task": "send_welcome", "user": 7}', unique_key="welcome-7")
    assert fq.finished(jid) is None  # live: no record yet
    job = _reserve(fq)
    clock.advance(1.5)
    job.delete()
    record = _record(fq, jid)
    assert (record.id, record.tube, record.outcome, record.attempts) == (jid, "default", "done", 1)
    assert record.ended_at == clock.now and record.ran == 1.5
    assert record.worker is not None and record.by is None and record.group is None
    assert record.unique_key == "welcome-7" and record.body.startswith(b'{"task"')
    assert record.result is None
    assert record.describe().startswith("done ") and "after 1 attempt, 1.5 s" in record.describe()
    # beanstalkd's semantics stay: the job itself is not found.
    assert fq.peek(jid) is None
    with pytest.raises(sqlq.JobNotFound):
        fq.stats_job(jid)


def test_a_completed_job_keeps_its_result_in_the_record(q: sqlq.Queue) -> None:
    jid = q.put(b"x")
    job = _reserve(q)
    job.release()  # a second attempt
    job = _reserve(q)
    job.complete(b"{\"ok\": true}")
    record = _record(q, jid)
    assert record.outcome == "done" and record.attempts == 2
    assert record.result == b'{"ok": true}'
    assert "after 2 attempts" in record.describe()


def test_a_cancelled_job_says_by_whom(q: sqlq.Queue) -> None:
    running = q.put(b"long")
    holder = _reserve(q)
    q.cancel(running, by="dashboard")
    waiting = q.put(b"later", delay=3600)
    q.cancel(waiting)
    record = _record(q, running)
    assert (record.outcome, record.by) == ("cancelled", "dashboard")
    assert record.worker is not None and record.ran is not None  # it was running
    assert record.describe().startswith("cancelled ") and "by the dashboard" in record.describe()
    other = _record(q, waiting)
    assert (other.outcome, other.by, other.worker, other.ran) == ("cancelled", None, None, None)
    with pytest.raises(sqlq.JobCancelled):
        holder.delete()
    assert _record(q, running).outcome == "cancelled"  # the holder's late delete changes nothing


def test_a_job_deleted_by_id_is_deleted(q: sqlq.Queue) -> None:
    buried = q.put(b"b")
    _reserve(q).bury()
    q.delete(buried, by="ops")
    ready = q.put(b"r")
    q.delete(ready)
    assert (_record(q, buried).outcome, _record(q, buried).by) == ("deleted", "ops")
    assert (_record(q, ready).outcome, _record(q, ready).by) == ("deleted", None)
    assert _record(q, buried).describe().startswith("deleted ")


def test_every_worker_path_leaves_a_record(q: sqlq.Queue) -> None:
    ids = q.put_many([b"a", b"b", b"c", b"d", b"e", b"f"])
    first = _reserve(q)
    second = q.reserve(timeout=0, delete=first)  # the worker's delete-and-claim
    assert second is not None
    batch = q.reserve_many(3, timeout=0, delete=[second])  # a batch worker's
    q.delete_many(batch)
    for jid in ids[:5]:
        assert _record(q, jid).outcome == "done"
    assert q.finished(ids[5]) is None and q.peek(ids[5]) is not None


def test_a_lost_lease_leaves_no_record(fq: sqlq.Queue, clock: FakeClock) -> None:
    jid = fq.put(b"x", ttr=5)
    job = _reserve(fq)
    clock.advance(6)
    again = _reserve(fq)  # the reservation ran out; another holder has it
    with pytest.raises(sqlq.JobLost):
        job.delete()
    with pytest.raises(sqlq.JobLost):
        fq.delete_many([job])
    assert fq.finished(jid) is None and fq.peek(jid) is not None
    again.delete()
    assert _record(fq, jid).attempts == 2


@pytest.mark.parametrize("stale_first", [True, False])
def test_a_batch_naming_a_job_under_two_leases_deletes_it_under_the_live_one(
        fq: sqlq.Queue, clock: FakeClock, stale_first: bool) -> None:
    jid = fq.put(b"x", ttr=5)
    stale = _reserve(fq)
    clock.advance(6)
    live = _reserve(fq)
    with pytest.raises(sqlq.JobLost) as lost:
        fq.delete_many([stale, live] if stale_first else [live, stale])
    assert lost.value.job_ids == (jid,)
    assert fq.peek(jid) is None and _record(fq, jid).attempts == 2


def test_jobs_with_dependencies_leave_records(q: sqlq.Queue) -> None:
    parent = q.put(b"parent")
    child = q.put(b"child", after=[parent])
    orphan_parent = q.put(b"p2")
    waiting = q.put(b"c2", after=[orphan_parent])
    _reserve(q).delete()  # the parent, by its holder: the child is released
    q.delete(waiting)  # a waiting job, by id
    assert _record(q, parent).outcome == "done" and _record(q, parent).worker is not None
    assert _record(q, waiting).outcome == "deleted"
    assert q.peek(child) is not None and q.finished(child) is None


def test_the_body_is_kept_to_its_head(q: sqlq.Queue) -> None:
    jid = q.put(b"y" * 10_000)
    q.delete(jid)
    assert _record(q, jid).body == b"y" * BODY_HEAD


def test_an_empty_body_leaves_an_empty_head(q: sqlq.Queue) -> None:
    """SQLite's substr of an empty blob is NULL: every way a job ends keeps b"" instead."""
    by_id, held, claimed, batched, parent = q.put_many([b""] * 5)
    child = q.put(b"", after=[parent])
    q.delete(by_id)
    first = _reserve(q)  # held
    second = q.reserve(timeout=0, delete=first)  # claimed, by the delete-and-claim
    assert second is not None
    third = q.reserve(timeout=0, delete=second)  # batched
    assert third is not None
    q.delete_many([third])
    _reserve(q).delete()  # the parent, with its dependent: the linked delete
    q.delete(child)
    for jid in (by_id, held, claimed, batched, parent, child):
        assert _record(q, jid).body == b""


def test_deletes_sharing_one_commit_each_leave_their_record(db_url: str) -> None:
    """Group commit: threads' deletes in one transaction, each with its record."""
    queue = sqlq.Queue(db_url)
    try:
        ids = queue.put_many([b"%d" % i for i in range(40)])
        jobs = queue.reserve_many(40, timeout=0)
        barrier = threading.Barrier(4)

        def delete(part: list[sqlq.Job]) -> None:
            barrier.wait()
            for job in part:
                job.delete()

        threads = [threading.Thread(target=delete, args=(jobs[i::4],)) for i in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert all(queue.finished(jid) is not None for jid in ids)
    finally:
        queue.close()


def test_unknown_ids_have_no_record(q: sqlq.Queue) -> None:
    assert q.finished(10**9) is None
    assert q.finished(2**63 + 5) is None


# -- retention ---------------------------------------------------------------------------------


def _finish(q: sqlq.Queue, n: int, tube: str = "default") -> list[int]:
    ids = q.put_many([b"%d" % i for i in range(n)], tube=tube)
    for job in q.reserve_many(n, tubes=tube, timeout=0):
        job.delete()
    return ids


def test_records_go_after_their_age(fq: sqlq.Queue, clock: FakeClock) -> None:
    old = _finish(fq, 3)
    assert fq.prune()["finished"] == 0  # a week by default
    clock.advance(6 * 86400)
    new = _finish(fq, 2)
    clock.advance(86400 + 1)
    assert fq.prune()["finished"] == 3
    assert all(fq.finished(jid) is None for jid in old)  # None after its retention
    assert all(fq.finished(jid) is not None for jid in new)


def test_a_count_bound_keeps_the_newest_per_outcome(fq: sqlq.Queue, clock: FakeClock) -> None:
    fq.retention(max_count=5)
    ids = []
    for _ in range(12):
        ids += _finish(fq, 1)
        clock.advance(0.001)
    cancelled = fq.put(b"c")
    fq.cancel(cancelled)
    assert fq.prune()["finished"] == 7
    assert [jid for jid in ids if fq.finished(jid) is not None] == ids[-5:]
    assert fq.finished(cancelled) is not None  # another outcome: its own bound
    assert fq.prune()["finished"] == 0


def test_a_tube_has_its_own_retention(fq: sqlq.Queue, clock: FakeClock) -> None:
    fq.retention(max_age=3600)
    fq.retention("audit", max_age=30 * 86400, max_count=100)
    kept = fq.retentions()
    assert kept[""].max_age == 3600 and kept[""].max_count == 10_000
    assert (kept["audit"].max_age, kept["audit"].max_count) == (30 * 86400, 100)
    plain, audit = _finish(fq, 2), _finish(fq, 2, tube="audit")
    clock.advance(2 * 3600)
    assert fq.prune()["finished"] == 2
    assert all(fq.finished(j) is None for j in plain)
    assert all(fq.finished(j) is not None for j in audit)
    fq.retention("audit")  # back to every tube's
    assert "audit" not in fq.retentions()
    assert fq.prune()["finished"] == 2


def test_pruning_works_in_batches(fq: sqlq.Queue, clock: FakeClock) -> None:
    ids = _finish(fq, 25)
    clock.advance(8 * 86400)
    gone = _sync(fq).operations.prune(batch=4)
    assert (gone["finished"], gone["results"], gone["more"]) == (25, 0, 0)
    assert all(fq.finished(j) is None for j in ids)


def test_expired_results_are_pruned(fq: sqlq.Queue, clock: FakeClock) -> None:
    jid = fq.put(b"x")
    _reserve(fq).complete(b"r")
    assert _record(fq, jid).result == b"r"
    clock.advance(_sync(fq).result_ttl_ms / 1000 + 1)
    assert _record(fq, jid).result is None  # expired: no longer read
    assert fq.prune()["results"] == 1


@pytest.mark.face
@pytest.mark.parametrize(("kwargs", "error"), [
    ({"max_age": 0}, ValueError), ({"max_age": -1}, ValueError),
    ({"max_count": -1}, ValueError), ({"max_count": 1.5}, TypeError),
    ({"max_age": "day"}, TypeError),
])
def test_bad_retention_is_refused(q: sqlq.Queue, kwargs: dict[str, Any],
                                  error: type[Exception]) -> None:
    with pytest.raises(error):
        q.retention(**kwargs)
    assert q.retentions()[""].max_count == 10_000


@pytest.mark.face
@pytest.mark.parametrize(("by", "error"), [(3, TypeError), ("", ValueError),
                                           ("x" * 201, ValueError)])
def test_a_bad_by_is_refused(q: sqlq.Queue, by: object, error: type[Exception]) -> None:
    jid = q.put(b"x")
    with pytest.raises(error):
        q.delete(jid, by=by)  # type: ignore[arg-type]
    with pytest.raises(error):
        q.cancel(jid, by=by)  # type: ignore[arg-type]
    assert q.peek(jid) is not None


def test_the_record_keeps_the_jobs_group_on_every_end(fq: sqlq.Queue) -> None:
    """The group (issue 38) is on the record whichever statement ended the job: the
    worker's delete, delete-and-claim, a batch delete, a delete by id, a cancel, and a
    parent's linked delete."""
    ids = fq.put_many([b"x"] * 6, tube="g", group="acct-1")
    first = fq.reserve("g", timeout=0)
    assert first is not None
    second = fq.reserve("g", timeout=0, delete=first)  # delete-and-claim
    assert second is not None
    second.delete()  # the worker's delete
    batch = fq.reserve_many(2, "g", timeout=0)
    fq.delete_many(batch)  # a batch delete
    fq.delete(ids[4])  # by id
    fq.cancel(ids[5])
    parent = fq.put(b"p", tube="g", group="acct-2")
    fq.put(b"c", tube="g", after=parent)
    fq.delete(parent)  # a job with dependents: the linked delete
    assert [_record(fq, i).group for i in ids] == ["acct-1"] * 6
    assert _record(fq, parent).group == "acct-2"
