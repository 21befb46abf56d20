"""reserve_many and delete_many: many jobs per commit, with one-at-a-time semantics."""

from __future__ import annotations

import time

import pytest

import sqlq
from sqlq import JobLost, Queue
from tests.timing import FakeClock

pytestmark = [pytest.mark.both_apis, pytest.mark.sqlite3_driver]


def ready_count(q: Queue, tube: str = "default") -> int:
    return int(q.stats_tube(tube)["current-jobs-ready"])


def test_order_across_tubes_and_priorities(q: Queue) -> None:
    a = [q.put(b"a%d" % i, tube="a", priority=p) for i, p in enumerate((5, 1, 5, 9))]
    b = [q.put(b"b%d" % i, tube="b", priority=p) for i, p in enumerate((1, 5, 0))]
    q.put(b"other", tube="c", priority=0)  # not watched
    first = q.reserve_many(4, tubes=["a", "b"], timeout=0)
    # priority, then id, across the watched tubes: as reserve would, one at a time
    assert [j.id for j in first] == [b[2], a[1], b[0], a[0]]
    assert all(j.state == "reserved" for j in first)
    rest = q.reserve_many(10, tubes=["a", "b"], timeout=0)
    assert [j.id for j in rest] == [a[2], b[1], a[3]]
    assert q.reserve_many(10, tubes=["a", "b"], timeout=0) == []
    assert ready_count(q, "c") == 1


def test_each_job_has_its_own_lease(q: Queue) -> None:
    q.put_many([b"x"] * 5)
    jobs = q.reserve_many(5, timeout=0)
    assert len(jobs) == 5
    assert len({j.lease for j in jobs}) == 5
    assert all(j.reserves == 1 for j in jobs)


def test_paused_tubes_are_skipped(q: Queue) -> None:
    q.put(b"p", tube="paused", priority=0)
    live = q.put(b"l", tube="live", priority=9)
    q.pause_tube("paused", 60)
    jobs = q.reserve_many(10, tubes=["paused", "live"], timeout=0)
    assert [j.id for j in jobs] == [live]


def test_due_delayed_and_expired_jobs_count_as_ready(fq: Queue, clock: FakeClock) -> None:
    expired = fq.put(b"e", priority=3, ttr=5)
    held = fq.reserve(timeout=0)
    assert held is not None and held.id == expired
    delayed = fq.put(b"d", priority=2, delay=10)
    ready = fq.put(b"r", priority=1)
    later = fq.put(b"l", priority=0, delay=100)
    clock.advance(20)
    jobs = fq.reserve_many(10, timeout=0)
    assert [j.id for j in jobs] == [ready, delayed, expired]
    assert jobs[2].timeouts == 1 and jobs[2].reserves == 2
    assert later not in [j.id for j in jobs]
    with pytest.raises(JobLost):
        held.delete()


def test_an_expired_lease_comes_back_after_claims_on_other_tubes(
        fq: Queue, clock: FakeClock) -> None:
    """A claim on other tubes says nothing of this tube's expired leases (PostgreSQL's
    floors once moved one start for every list of tubes past them: the job stayed
    reserved until the next full read, up to 30 s)."""
    expired = fq.put(b"e", tube="b", ttr=1)
    assert fq.reserve("b", timeout=0) is not None
    clock.advance(2.5)
    assert fq.reserve("a", timeout=0) is None
    again = fq.reserve(["b", "a"], timeout=0)
    assert again is not None and again.id == expired and again.timeouts == 1


def test_one_lease_expiring_leaves_the_others(fq: Queue, clock: FakeClock) -> None:
    short = fq.put(b"s", priority=0, ttr=5)
    long1 = fq.put(b"l1", priority=1, ttr=100)
    long2 = fq.put(b"l2", priority=2, ttr=100)
    jobs = fq.reserve_many(3, timeout=0)
    assert [j.id for j in jobs] == [short, long1, long2]
    clock.advance(10)
    jobs[1].touch()
    with pytest.raises(JobLost):
        jobs[0].delete()
    jobs[2].delete()
    jobs[1].delete()
    assert fq.peek(long1) is None and fq.peek(long2) is None
    assert fq.peek(short) is not None


def test_delete_many_deletes_the_live_and_names_the_lost(fq: Queue, clock: FakeClock) -> None:
    ids = [fq.put(b"x", ttr=5 if i == 1 else 100) for i in range(4)]
    jobs = fq.reserve_many(4, timeout=0)
    assert [j.id for j in jobs] == ids
    clock.advance(10)  # ids[1]'s TTR ran out
    with pytest.raises(JobLost) as caught:
        fq.delete_many(jobs)
    assert list(caught.value.job_ids) == [ids[1]]
    assert str(ids[1]) in str(caught.value)
    assert [fq.peek(i) is None for i in ids] == [True, False, True, True]
    assert [j.state for j in jobs] == ["deleted", "reserved", "deleted", "deleted"]
    # the lost job is ready again, for anyone
    again = fq.reserve_many(10, timeout=0)
    assert [j.id for j in again] == [ids[1]]
    fq.delete_many(again)
    assert fq.peek(ids[1]) is None


def test_delete_many_of_a_job_deleted_by_its_next_holder(fq: Queue, clock: FakeClock) -> None:
    jid = fq.put(b"x", ttr=5)
    old = fq.reserve_many(1, timeout=0)
    clock.advance(10)
    new = fq.reserve_many(1, timeout=0)
    assert [j.id for j in new] == [jid]
    fq.delete_many(new)
    with pytest.raises(JobLost) as caught:
        fq.delete_many(old)
    assert list(caught.value.job_ids) == [jid]
    fq.delete_many([])  # nothing to do: no error


def test_reserve_many_delete_claims_the_next_batch_in_one_go(q: Queue) -> None:
    ids = q.put_many([b"%d" % i for i in range(7)])
    jobs = q.reserve_many(3, timeout=0)
    seen = [j.id for j in jobs]
    while jobs:
        done = jobs
        jobs = q.reserve_many(3, timeout=0, delete=done)
        assert all(j.state == "deleted" for j in done)
        seen += [j.id for j in jobs]
    assert seen == ids
    assert q.stats()["current-jobs-reserved"] == 0
    assert q.peek(ids[-1]) is None


def test_reserve_many_delete_with_a_lost_lease_claims_nothing(
        fq: Queue, clock: FakeClock) -> None:
    short = fq.put(b"s", priority=0, ttr=5)
    keep = fq.put(b"k", priority=1, ttr=100)
    jobs = fq.reserve_many(2, timeout=0)
    waiting = fq.put_many([b"w1", b"w2"], priority=5)
    clock.advance(10)  # short's lease is lost; it is ready again
    with pytest.raises(JobLost) as caught:
        fq.reserve_many(10, timeout=0, delete=jobs)
    assert list(caught.value.job_ids) == [short]
    assert "nothing was claimed" in str(caught.value)
    assert fq.peek(keep) is None  # the live lease's delete stands
    assert jobs[1].state == "deleted" and jobs[0].state == "reserved"
    assert ready_count(fq) == 3  # short and both waiting jobs: nothing claimed
    assert [j.id for j in fq.reserve_many(10, timeout=0)] == [short, *waiting]


@pytest.mark.face
def test_arguments_are_checked(q: Queue) -> None:
    q.put(b"x")
    with pytest.raises(ValueError):
        q.reserve_many(0, timeout=0)
    with pytest.raises(TypeError):
        q.reserve_many("3", timeout=0)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        q.delete_many(5)  # type: ignore[arg-type]
    peeked = q.peek_ready()
    assert peeked is not None
    with pytest.raises(ValueError):
        q.delete_many([peeked])
    assert ready_count(q) == 1


def test_timeout_returns_empty_after_waiting(q: Queue) -> None:
    start = time.monotonic()
    assert q.reserve_many(5, timeout=0.3) == []
    assert 0.25 <= time.monotonic() - start < 5


def test_job_lost_of_a_single_delete_names_its_job(fq: Queue, clock: FakeClock) -> None:
    jid = fq.put(b"x", ttr=5)
    job = fq.reserve(timeout=0)
    assert job is not None
    clock.advance(10)
    with pytest.raises(sqlq.JobLost) as caught:
        job.delete()
    assert caught.value.job_ids == (jid,)


def test_a_job_named_under_a_stale_and_a_live_lease(fq: Queue, clock: FakeClock) -> None:
    jid = fq.put(b"x", ttr=5)
    stale = fq.reserve_many(1, timeout=0)
    clock.advance(10)
    live = fq.reserve_many(1, timeout=0)
    with pytest.raises(JobLost) as caught:
        fq.delete_many([*live, *stale])
    assert list(caught.value.job_ids) == [jid]
    assert fq.peek(jid) is None  # deleted under the live lease
    assert live[0].state == "deleted" and stale[0].state == "reserved"


def test_claimed_jobs_read_as_jobs_built_field_by_field(fq: Queue, clock: FakeClock) -> None:
    # Job.from_claim skips Job.__init__ (a batch worker's per-job cost): every attribute
    # must still read as __init__ would set it, through reserve and reserve_many alike.
    put_at = clock()
    first = fq.put(b"one", tube="t", priority=7, ttr=5, delay=2, unique_key="k")
    second = fq.put(b"two", tube="t", priority=8, ttr=3)
    clock.advance(2.5)
    many = fq.reserve_many(1, tubes="t", timeout=0)
    one = fq.reserve(tubes="t", timeout=0)
    assert one is not None and [j.id for j in many] == [first]
    built = [
        sqlq.Job(fq, id=first, tube="t", body=b"one", priority=7, ttr_ms=5000,
                 state="reserved", reserves=1, lease=many[0].lease, created_at=put_at,
                 reserved_until=clock() + 5000, unique_key="k", delay_ms=2000),
        sqlq.Job(fq, id=second, tube="t", body=b"two", priority=8, ttr_ms=3000,
                 state="reserved", reserves=1, lease=one.lease, created_at=put_at,
                 reserved_until=clock() + 3000),
    ]
    public = [name for name in sqlq.Job.__slots__ if not name.startswith("_")]
    for handle, expected in zip([*many, one], built, strict=True):
        job = getattr(handle, "sync", handle)  # the async API wraps the Job
        assert {name: getattr(job, name) for name in public} == \
            {name: getattr(expected, name) for name in public}
        assert type(job.ttr) is float and type(job.delay) is float
    many[0].delete()
    assert many[0].state == "deleted"


@pytest.mark.parametrize("size", [2, 64, 65, 150])
def test_delete_many_matches_each_id_with_its_own_lease(fq: Queue, clock: FakeClock,
                                                        size: int) -> None:
    # Whatever the batch's size (SQLite passes the pairs as JSON it writes itself), a job
    # reserved again since (same id, another lease) must stay, and only it is named; the
    # rest are deleted in the same commit.
    ids = fq.put_many([b"x"] * size, ttr=100)
    fq.put(b"short", ttr=5)
    jobs = fq.reserve_many(size + 1, timeout=0)
    assert len(jobs) == size + 1
    clock.advance(10)  # the short job's TTR ran out: another holder takes it
    again = fq.reserve_many(size, timeout=0)
    assert [j.id for j in again] == [jobs[-1].id]
    with pytest.raises(JobLost) as caught:
        fq.delete_many(jobs)
    assert list(caught.value.job_ids) == [jobs[-1].id]
    assert all(fq.peek(i) is None for i in ids)
    held = fq.peek(jobs[-1].id)
    assert held is not None and held.state == "reserved"
    fq.delete_many(again)  # the new holder's lease is intact
    assert fq.peek(jobs[-1].id) is None
