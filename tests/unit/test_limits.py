"""Flow control (sqlq/core/limits.py): a tube's concurrency cap and rate, enforced in the claim.

Each rule on both backends: the cap counts live leases only, several Queues (as several
processes would) share it, a limited tube never blocks the others a reserve watches,
batches claim at most the free slots, the rate is a token bucket of N (burst N), a limit
set by another Queue is obeyed at once, reserve_job bypasses the limits, and a blocked
reserve wakes when a slot frees or the rate's next token is due. The 8-process run and
the 10-second rate run are in tests/integration/test_limits.py.
"""

from __future__ import annotations

import functools
import json
import threading
import time
from typing import Any

import pytest

import sqlq
from sqlq.core import limits

from ..timing import FakeClock, soon

pytestmark = [pytest.mark.both_apis, pytest.mark.sqlite3_driver]


def fill(q: sqlq.Queue, tube: str, n: int, priority: int = 1024) -> list[int]:
    return [q.put(f"{tube}-{i}", tube=tube, priority=priority) for i in range(n)]


def reserved(q: sqlq.Queue, tube: str) -> int:
    return int(q.stats_tube(tube)["current-jobs-reserved"])


def test_limit_is_stored_and_read_back(q: sqlq.Queue) -> None:
    assert q.limits() == {}
    assert q.limit("a", concurrency=2) == {"concurrency": 2, "rate": None}
    assert q.limit("a", rate=(20, 1)) == {"concurrency": 2, "rate": (20, 1.0)}  # kept
    assert q.limit("b", rate=(100, 60)) == {"concurrency": None, "rate": (100, 60.0)}
    assert q.limits() == {"a": {"concurrency": 2, "rate": (20, 1.0)},
                          "b": {"concurrency": None, "rate": (100, 60.0)}}
    stats = q.stats_tube("a")
    assert (stats["limit-concurrency"], stats["limit-rate"], stats["limit-rate-seconds"]) \
        == (2, 20, 1.0)
    assert q.limit("a", concurrency=None) == {"concurrency": None, "rate": (20, 1.0)}
    assert q.limit("a", rate=None) == {"concurrency": None, "rate": None}
    assert q.limits() == {"b": {"concurrency": None, "rate": (100, 60.0)}}
    assert q.stats_tube("a")["limit-concurrency"] == 0
    # A row made for limits alone is no pause: not counted, nor listed as paused.
    assert q.stats_tube("b")["cmd-pause-tube"] == 0
    assert q.stats_tube("b")["pause"] == 0


BAD_LIMITS: list[tuple[dict[str, Any], type[Exception]]] = [
    ({"concurrency": 0}, ValueError), ({"concurrency": -1}, ValueError),
    ({"concurrency": 1.5}, TypeError), ({"concurrency": True}, TypeError),
    ({"rate": 5}, TypeError), ({"rate": (0, 1)}, ValueError), ({"rate": (5, 0)}, ValueError),
    ({"rate": (5, -1)}, ValueError), ({"rate": ("5", 1)}, TypeError),
    ({"rate": (1, 2, 3)}, TypeError), ({"concurrency": 2, "rate": (0, 1)}, ValueError),
]


@pytest.mark.face
def test_bad_limits_change_nothing(q: sqlq.Queue) -> None:
    q.limit("a", concurrency=3)
    for kwargs, error in BAD_LIMITS:
        with pytest.raises(error):
            q.limit("a", **kwargs)
        assert q.limits() == {"a": {"concurrency": 3, "rate": None}}, kwargs
    with pytest.raises(sqlq.InvalidTube):
        q.limit("bad name!", concurrency=1)


def test_rate_text() -> None:
    assert limits.parse_rate("20/s") == (20, 1.0)
    assert limits.parse_rate("100/m") == (100, 60.0)
    assert limits.parse_rate("5/h") == (5, 3600.0)
    assert limits.parse_rate("3/10s") == (3, 10.0)
    assert limits.format_rate(3, 10.0) == "3/10s"
    assert limits.format_rate(20, 1.0) == "20/s"
    with pytest.raises(ValueError, match="20/s"):
        limits.parse_rate("20 per second")


def test_cap_is_shared_by_every_queue(q: sqlq.Queue, db_url: str) -> None:
    fill(q, "a", 6)
    q.limit("a", concurrency=2)
    with sqlq.Queue(db_url) as other:
        first = q.reserve("a", timeout=0)
        second = other.reserve("a", timeout=0)
        assert first is not None and second is not None
        assert other.reserve("a", timeout=0) is None
        assert q.reserve("a", timeout=0) is None
        first.delete()  # a slot frees: delete, release and bury each free one
        third = other.reserve("a", timeout=0)
        assert third is not None and q.reserve("a", timeout=0) is None
        third.release()
        fourth = q.reserve("a", timeout=0)
        assert fourth is not None and other.reserve("a", timeout=0) is None
        fourth.bury()
        assert other.reserve("a", timeout=0) is not None
        assert reserved(q, "a") == 2


def test_expired_leases_do_not_count(fq: sqlq.Queue, clock: FakeClock) -> None:
    fill(fq, "a", 3)
    fq.limit("a", concurrency=1)
    held = fq.reserve("a", timeout=0)
    assert held is not None and fq.reserve("a", timeout=0) is None
    clock.advance(held.ttr + 0.001)  # the lease runs out: the slot is free
    again = fq.reserve("a", timeout=0)
    assert again is not None
    assert fq.reserve("a", timeout=0) is None
    with pytest.raises(sqlq.JobLost):
        held.delete()


def test_limited_tube_never_blocks_the_others(q: sqlq.Queue) -> None:
    fill(q, "capped", 3, priority=1)  # more urgent than the other tube's jobs
    fill(q, "free", 3, priority=9)
    q.limit("capped", concurrency=1)
    jobs = [q.reserve(["capped", "free"], timeout=0) for _ in range(4)]
    assert [j.tube for j in jobs if j is not None] == ["capped", "free", "free", "free"]
    assert q.reserve(["capped", "free"], timeout=0) is None


def test_batches_claim_at_most_the_free_slots(q: sqlq.Queue) -> None:
    fill(q, "a", 10)
    q.limit("a", concurrency=3)
    one = q.reserve("a", timeout=0)
    assert one is not None
    batch = q.reserve_many(10, "a", timeout=0)
    assert len(batch) == 2
    assert q.reserve_many(10, "a", timeout=0) == []
    again = q.reserve_many(10, "a", timeout=0, delete=batch)  # deletes free two slots
    assert len(again) == 2 and reserved(q, "a") == 3
    nxt = q.reserve("a", timeout=0, delete=one)
    assert nxt is not None and reserved(q, "a") == 3


def test_rate_is_a_token_bucket_of_n(fq: sqlq.Queue, clock: FakeClock) -> None:
    fill(fq, "a", 20)
    fq.limit("a", rate=(4, 2))  # 4 tokens, one more every 0.5 s
    assert len(fq.reserve_many(10, "a", timeout=0)) == 4  # the burst: a full bucket
    assert fq.reserve("a", timeout=0) is None
    assert fq.engine.due(fq.engine.tubes("a")) == clock.now + 500
    clock.advance(0.499)
    assert fq.reserve("a", timeout=0) is None
    clock.advance(0.001)
    assert fq.reserve("a", timeout=0) is not None
    assert fq.reserve("a", timeout=0) is None
    clock.advance(10)  # idle: the bucket fills to 4, no more
    assert len(fq.reserve_many(10, "a", timeout=0)) == 4


def test_a_token_due_while_the_look_ran_wakes_the_waiter(fq: sqlq.Queue,
                                                          clock: FakeClock) -> None:
    """The look finds the bucket empty; its next token comes due before the waiter asks
    when to look again. Counted from now, that time is past and no longer counts: the
    waiter slept to its deadline (four claimers stalled 8 s in CI). Counted from the look
    (Engine.due's ``since``), it is due at once: one more look, and the job."""
    fill(fq, "a", 3)
    fq.limit("a", rate=(1, 1))
    assert fq.reserve("a", timeout=0) is not None  # the bucket is empty for a second
    tubes = fq.engine.tubes("a")
    timer_wakes = []
    start = time.monotonic()

    def look(events: Any) -> sqlq.Job | None:
        found = fq.engine.look(tubes, None, events)
        # Woken by the token's time (a second on; past the quick re-checks of a commit),
        # the look finds the clock not there yet: the token comes due before the next
        # read, as on a loaded machine. (Through a transaction pool, where waiters poll
        # every 0.5 s, the poll would find it anyway.)
        if found is None and not timer_wakes and time.monotonic() - start > 0.5:
            timer_wakes.append(clock.now)
            clock.advance(1)
        return found

    job = fq.engine.wait(look, start + soon(30), functools.partial(fq.engine.due, tubes))
    took = time.monotonic() - start
    assert job is not None and timer_wakes
    assert took < soon(3), f"slept {took:.1f} s: past the token, to the deadline"


def test_rate_and_cap_together(fq: sqlq.Queue, clock: FakeClock) -> None:
    fill(fq, "a", 20)
    fq.limit("a", concurrency=2, rate=(10, 1))
    jobs = fq.reserve_many(10, "a", timeout=0)
    assert len(jobs) == 2  # the cap is the smaller
    fq.delete_many(jobs)
    assert len(fq.reserve_many(10, "a", timeout=0)) == 2
    assert fq.reserve("a", timeout=0) is None


def test_a_limit_set_elsewhere_is_obeyed_at_once(q: sqlq.Queue, db_url: str) -> None:
    fill(q, "a", 5)
    first = q.reserve("a", timeout=0)  # this queue has learnt that "a" has no limits
    assert first is not None
    with sqlq.Queue(db_url) as other:
        other.limit("a", concurrency=2)
        assert q.reserve("a", timeout=0) is not None
        assert q.reserve("a", timeout=0) is None
        other.limit("a", concurrency=None)  # and a limit removed elsewhere: gone at once
    assert q.reserve("a", timeout=0) is not None


def test_a_limit_set_elsewhere_does_not_starve_a_busy_watcher(q: sqlq.Queue,
                                                               db_url: str) -> None:
    """A Queue that learnt "no limits" for tubes a and b, whose b never runs dry (so its
    plain claims, which skip a limited tube, never find nothing), claims from a within
    LIMITS_STALE of another Queue limiting a: it reads the limits again, not only when
    a claim comes back empty."""
    q.put("b-first", tube="b")
    first = q.reserve(["a", "b"], timeout=0)  # learnt: neither a nor b has limits
    assert first is not None
    first.delete()
    with sqlq.Queue(db_url) as other:
        other.limit("a", concurrency=2)
        other.put("a-0", tube="a", priority=0)  # more urgent than any of b's
    limited_at = time.monotonic()
    deadline = limited_at + soon(1.0)  # LIMITS_STALE is 1 s
    took_b = 0
    while time.monotonic() < deadline:
        q.put("b", tube="b")  # a steady supply: the claim never comes back empty
        job = q.reserve(["a", "b"], timeout=0)
        assert job is not None
        job.delete()
        if job.tube == "a":
            break
        took_b += 1
    else:
        pytest.fail(f"tube a starved: {took_b} claims from b since it was limited")


def test_reserve_job_bypasses_the_cap(q: sqlq.Queue) -> None:
    ids = fill(q, "a", 3)
    q.limit("a", concurrency=1)
    assert q.reserve("a", timeout=0) is not None
    job = q.reserve_job(ids[2])  # an operator's act on one named job
    assert job.id == ids[2] and reserved(q, "a") == 2
    assert q.reserve("a", timeout=0) is None


def test_delete_with_a_lost_lease_claims_nothing(fq: sqlq.Queue, clock: FakeClock) -> None:
    fill(fq, "a", 3)
    fq.limit("a", concurrency=2)
    held = fq.reserve("a", timeout=0)
    assert held is not None
    clock.advance(held.ttr + 1)
    with pytest.raises(sqlq.JobLost):
        fq.reserve("a", timeout=0, delete=held)
    assert reserved(fq, "a") == 0


def wait_in_thread(q: sqlq.Queue, tube: str, timeout: float) -> tuple[threading.Thread,
                                                                        list[Any]]:
    got: list[Any] = []

    def run() -> None:
        start = time.monotonic()
        job = q.reserve(tube, timeout=timeout)
        got.append((job, time.monotonic() - start))

    thread = threading.Thread(target=run)
    thread.start()
    return thread, got


def test_a_blocked_reserve_wakes_when_a_slot_frees(q: sqlq.Queue, db_url: str) -> None:
    fill(q, "a", 5)
    q.limit("a", concurrency=1)
    held = q.reserve("a", timeout=0)
    with sqlq.Queue(db_url) as waiter:
        for free in ("delete", "release", "bury"):  # each frees the slot, with a commit
            assert held is not None
            thread, got = wait_in_thread(waiter, "a", 60)
            thread.join(0.2)  # the tube is full: the reserve waits (and is waiting now)
            assert thread.is_alive() and not got, free
            start = time.monotonic()
            getattr(held, free)()
            thread.join(soon())
            assert got and got[0][0] is not None, free
            assert time.monotonic() - start < soon(), free  # woken, not a 60 s timeout
            held = got[0][0]


def test_a_blocked_reserve_wakes_when_the_rate_allows(q: sqlq.Queue) -> None:
    fill(q, "a", 3)
    q.limit("a", rate=(1, 0.6))
    before = time.monotonic()  # the first claim's clock reads no earlier than this
    assert q.reserve("a", timeout=0) is not None  # the one token
    start = time.monotonic()
    job = q.reserve("a", timeout=30)  # woken by the token's due time, not a commit
    end = time.monotonic()
    assert job is not None
    # Not before the next token (0.6 s after the first claim, so after `before`: measured
    # from `start`, a busy machine's late return of the first reserve looked like an early
    # token), and soon after it, not at the 30 s timeout.
    assert end - before >= 0.55
    assert end - start < soon(0.6)


def test_cli_limit(db_url: str) -> None:
    from click.testing import CliRunner

    from sqlq.cli import cli

    def run(*args: str) -> tuple[int, str, str]:
        r = CliRunner().invoke(cli, ["--db", db_url, "limit", *args])
        return r.exit_code, r.stdout, r.stderr

    assert run("emails", "--concurrency", "2", "--rate", "20/s")[:2] == (
        0, "emails: concurrency 2, rate 20/s\n")
    assert run("reports", "-r", "3/10s")[0] == 0
    assert run("emails", "--rate", "none")[1] == "emails: concurrency 2, no rate\n"
    code, out, _ = run("--json")
    assert code == 0 and [json.loads(line) for line in out.splitlines()] == [
        {"tube": "emails", "concurrency": 2, "rate": None},
        {"tube": "reports", "concurrency": None, "rate": [3, 10.0]}]
    for bad in (["emails", "-c", "0"], ["emails", "-r", "5/y"], ["emails", "-c", "x"],
                ["emails", "--clear", "-c", "3"], ["-c", "3"]):
        code, _, err = run(*bad)
        assert code == 2 and err.count("\n") == 1, (bad, err)
    assert run("emails", "--clear")[1] == "emails: no cap, no rate\n"
    assert run()[1] == "reports: no cap, rate 3/10s\n"
    with sqlq.Queue(db_url) as q:
        assert q.limits() == {"reports": {"concurrency": None, "rate": (3, 10.0)}}


def test_postgres_a_delete_notifies_only_when_it_frees_a_caps_slot(pg_url: str) -> None:
    """Migration 0016: a worker's delete of a job of a tube without a cap sends no NOTIFY,
    by every delete path (one per acknowledgement would queue every ack on NOTIFY's
    lock); one whose reservation counted against a cap sends one (a reserve may be
    blocked on that slot), as does a job held before the cap was set, or taken by
    reserve-job. A rate alone is no cap: its waiters wake at the next token's time."""
    import psycopg

    with psycopg.connect(pg_url, autocommit=True) as listener, \
            psycopg.connect(pg_url, autocommit=True) as marker, \
            sqlq.Queue(pg_url, durability="normal") as q:
        listener.execute("LISTEN sqlq")

        def heard(act: Any) -> list[str]:
            """The payloads of the notifications ``act()`` sent (notifications arrive in
            commit order: all of them are in before the marker sent after it)."""
            act()
            marker.execute("NOTIFY sqlq, 'marker'")
            payloads = []
            for note in listener.notifies(timeout=soon()):
                if note.payload == "marker":
                    return payloads
                payloads.append(note.payload)
            raise AssertionError(f"the marker never came (heard {payloads})")

        def reserve(tube: str) -> sqlq.Job:
            job = q.reserve(tube, timeout=0)
            assert job is not None
            return job

        for tube in ("free", "paced", "capped"):
            fill(q, tube, 12)
        q.limit("paced", rate=(1000, 1))
        held = reserve("capped")  # held before the cap
        q.limit("capped", concurrency=1)
        heard(lambda: None)  # the puts' and limits' own notifications
        def every_delete(tube: str) -> list[list[str]]:
            """What each way of deleting a reserved job of ``tube`` sent."""
            by_id, fast = reserve(tube), reserve(tube)
            return [heard(lambda: reserve(tube).delete()),
                    heard(lambda: q.delete(by_id.id, lease=by_id.lease)),
                    heard(lambda: q.reserve("other", timeout=0, delete=fast)),
                    heard(lambda: q.delete_many([reserve(tube)])),
                    heard(lambda: q.reserve_many(1, "other", timeout=0,
                                                 delete=[reserve(tube)]))]

        assert every_delete("free") == [[]] * 5
        assert every_delete("paced") == [[]] * 5
        assert heard(held.delete) == ["capped"]  # held before the cap: marked by limit()
        # One slot: each reserve below is the only one (every_delete's two held at once
        # would not be let out).
        assert heard(lambda: reserve("capped").delete()) == ["capped"]
        job = reserve("capped")
        assert heard(lambda: q.delete(job.id, lease=job.lease)) == ["capped"]
        job = reserve("capped")
        assert heard(lambda: q.reserve("other", timeout=0, delete=job)) == [""]
        assert heard(lambda: q.delete_many([reserve("capped")])) == [""]
        assert heard(lambda: q.reserve_many(1, "other", timeout=0,
                                            delete=[reserve("capped")])) == [""]
        ready = q.peek_ready("capped")
        assert ready is not None
        assert heard(lambda: q.reserve_job(ready.id).delete()) == ["capped"]
        assert heard(lambda: q.limit("capped", concurrency=None)) == ["capped"]
        # No cap now: a plain claim's job is unmarked.
        assert heard(lambda: reserve("capped").delete()) == []
