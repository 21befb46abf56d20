"""Debounce: ``put(..., unique_key=k, on_conflict="replace")`` (issue 38), on every backend
and both APIs.

A ready, delayed or waiting job holding the key is changed in place (body, priority,
ttr, delay from this put) and keeps its id; a reserved or buried one is never changed:
the key passes to a new job that waits for it, which later replaces change in place.
"""

from __future__ import annotations

import threading
import time

import pytest

import sqlq
from tests.timing import FakeClock, soon

pytestmark = [pytest.mark.both_apis, pytest.mark.sqlite3_driver]


def _keyed(q: sqlq.Queue, tube: str = "default") -> list[int]:
    """The tube's live jobs by state: ready, delayed, reserved, buried, waiting."""
    stats = q.stats_tube(tube)
    return [stats[f"current-jobs-{s}"] for s in ("ready", "delayed", "reserved", "buried",
                                                   "waiting")]


def test_a_hundred_replaces_in_a_second_leave_one_job_due_after_the_last(q: sqlq.Queue) -> None:
    """The issue's "must show": 100 puts of one key with delay=5 within a second leave one
    job, with the last body, due 5 s after the last put (read from the stored due time,
    not waited for)."""
    start = time.time()
    ids = []
    for i in range(100):
        before = int(time.time() * 1000)
        ids.append(q.put(f"body {i}", unique_key="k", delay=5, on_conflict="replace"))
        after = int(time.time() * 1000)
    assert time.time() - start < soon(1)
    assert set(ids) == {ids[0]}
    assert _keyed(q) == [0, 1, 0, 0, 0]
    assert q.stats()["current-jobs-delayed"] == 1
    job = q.peek(ids[0])
    assert job is not None and job.body == b"body 99" and job.state == "delayed"
    assert job.delay_until is not None
    assert before + 5000 <= job.delay_until <= after + 5000
    assert job.delay == 5


def test_a_ready_job_takes_the_new_body_and_options_and_keeps_its_id(q: sqlq.Queue) -> None:
    first = q.put(b"old", unique_key="k", priority=100, ttr=30)
    other = q.put(b"other")
    again = q.put(b"new", unique_key="k", priority=5, ttr=90, on_conflict="replace")
    assert again == first
    job = q.peek(first)
    assert job is not None and (job.body, job.priority, job.ttr, job.state) == (
        b"new", 5, 90.0, "ready")
    assert q.stats()["current-jobs-ready"] == 2
    claimed = q.reserve(timeout=0)
    assert claimed is not None and claimed.id == first and claimed.body == b"new"
    assert q.peek(other) is not None


def test_the_default_keeps_the_live_job_as_it_is(q: sqlq.Queue) -> None:
    first = q.put(b"old", unique_key="k", delay=60)
    assert q.put(b"new", unique_key="k") == first
    assert q.put(b"newer", unique_key="k", on_conflict="keep") == first
    job = q.peek(first)
    assert job is not None and job.body == b"old" and job.state == "delayed"


def test_a_replace_without_a_holder_puts_the_job(q: sqlq.Queue) -> None:
    jid = q.put(b"x", unique_key="k", delay=30, on_conflict="replace")
    job = q.peek(jid)
    assert job is not None and job.state == "delayed" and job.unique_key == "k"
    assert q.stats()["total-jobs"] == 1
    q.delete(jid)
    assert q.put(b"y", unique_key="k", on_conflict="replace") > jid


def test_keys_are_per_tube(q: sqlq.Queue) -> None:
    a = q.put(b"a", tube="a", unique_key="k", on_conflict="replace")
    b = q.put(b"b", tube="b", unique_key="k", on_conflict="replace")
    assert a != b
    assert q.put(b"a2", tube="a", unique_key="k", on_conflict="replace") == a
    assert q.peek(b).body == b"b"  # type: ignore[union-attr]


def test_delay_counts_from_the_replace(fq: sqlq.Queue, clock: FakeClock) -> None:
    jid = fq.put(b"x", unique_key="k", delay=10, on_conflict="replace")
    clock.advance(8)
    fq.put(b"y", unique_key="k", delay=10, on_conflict="replace")
    clock.advance(8)  # 16 s after the first put, 8 after the second
    assert fq.reserve(timeout=0) is None
    clock.advance(3)
    job = fq.reserve(timeout=0)
    assert job is not None and job.id == jid and job.body == b"y"


def test_a_delayed_job_made_ready_and_a_ready_job_delayed(fq: sqlq.Queue,
                                                         clock: FakeClock) -> None:
    delayed = fq.put(b"x", unique_key="d", delay=3600)
    assert fq.put(b"now", unique_key="d", on_conflict="replace") == delayed
    job = fq.reserve(timeout=0)
    assert job is not None and job.id == delayed and job.body == b"now"
    job.delete()
    ready = fq.put(b"r", unique_key="r")
    fq.put(b"later", unique_key="r", delay=60, on_conflict="replace")
    assert fq.stats_job(ready)["state"] == "delayed"
    assert fq.reserve(timeout=0) is None
    clock.advance(61)
    again = fq.reserve(timeout=0)
    assert again is not None and again.id == ready and again.body == b"later"


def test_a_reserved_holder_is_followed_by_a_job_that_waits_for_it(q: sqlq.Queue) -> None:
    """"Run again after the running one": the running job is not changed; a new job takes
    the key and waits for it; later replaces change that one; it becomes ready when the
    running one is done, and not when it is retried."""
    running_id = q.put(b"v1", unique_key="k")
    running = q.reserve(timeout=0)
    assert running is not None and running.id == running_id
    follow = q.put(b"v2", unique_key="k", delay=0, on_conflict="replace")
    assert follow != running_id
    assert q.stats_job(follow)["state"] == "waiting"
    assert q.links(follow).parents == [running_id]
    assert q.put(b"v3", unique_key="k", priority=7, on_conflict="replace") == follow
    assert q.put(b"v4", unique_key="k") == follow  # a keep finds the follow-up
    held = q.peek(running_id)
    assert held is not None and held.body == b"v1" and held.state == "reserved"
    assert _keyed(q) == [0, 0, 1, 0, 1]
    running.release()  # a retry: the running job's work is not done
    assert q.stats_job(follow)["state"] == "waiting"
    retry = q.reserve(timeout=0)
    assert retry is not None and retry.id == running_id and retry.body == b"v1"
    retry.delete()
    job = q.reserve(timeout=0)
    assert job is not None and (job.id, job.body, job.priority) == (follow, b"v3", 7)


def test_a_follow_up_delay_counts_from_the_end_of_the_running_job(fq: sqlq.Queue,
                                                                  clock: FakeClock) -> None:
    fq.put(b"v1", unique_key="k")
    running = fq.reserve(timeout=0)
    assert running is not None
    follow = fq.put(b"v2", unique_key="k", delay=10, on_conflict="replace")
    clock.advance(30)
    running.delete()
    assert fq.stats_job(follow)["state"] == "delayed"
    clock.advance(9)
    assert fq.reserve(timeout=0) is None
    clock.advance(2)
    job = fq.reserve(timeout=0)
    assert job is not None and job.id == follow


def test_a_completed_or_cancelled_running_job_releases_its_follow_up(q: sqlq.Queue) -> None:
    q.put(b"v1", unique_key="k")
    running = q.reserve(timeout=0)
    assert running is not None
    follow = q.put(b"v2", unique_key="k", on_conflict="replace")
    running.complete(b"done")
    assert q.stats_job(follow)["state"] == "ready"
    second = q.reserve(timeout=0)
    assert second is not None and second.id == follow
    third = q.put(b"v3", unique_key="k", on_conflict="replace")
    q.cancel(second.id)
    assert q.stats_job(third)["state"] == "ready"


def test_the_workers_batch_acknowledgement_releases_the_follow_up(q: sqlq.Queue) -> None:
    """sqlq work deletes through reserve_many(delete=...): the delete-and-claim paths
    (PostgreSQL's functions) release the follow-up as a plain delete does."""
    q.put(b"v1", unique_key="k")
    running = q.reserve_many(1, timeout=0)
    follow = q.put(b"v2", unique_key="k", on_conflict="replace")
    nxt = q.reserve_many(5, timeout=0, delete=running)
    if not nxt:  # released after the claim's look: ready now
        nxt = q.reserve_many(5, timeout=0)
    assert [(j.id, j.body) for j in nxt] == [(follow, b"v2")]


def test_a_buried_holder_is_kept_and_followed(q: sqlq.Queue) -> None:
    """A buried job is never changed (its body and reason are an operator's evidence): a
    new job takes the key and waits for it as for a running one. Deleting the buried job
    (giving up on it) releases the follow-up; a kick runs the old job first."""
    buried_id = q.put(b"v1", unique_key="k")
    job = q.reserve(timeout=0)
    assert job is not None
    job.bury(reason="boom")
    follow = q.put(b"v2", unique_key="k", on_conflict="replace")
    assert follow != buried_id and q.stats_job(follow)["state"] == "waiting"
    buried = q.peek(buried_id)
    assert buried is not None and (buried.state, buried.body, buried.bury_reason) == (
        "buried", b"v1", "boom")
    assert q.put(b"v3", unique_key="k", on_conflict="replace") == follow
    q.kick_job(buried_id)
    old = q.reserve(timeout=0)
    assert old is not None and old.id == buried_id
    assert q.stats_job(follow)["state"] == "waiting"
    old.bury()
    q.delete(buried_id)
    new = q.reserve(timeout=0)
    assert new is not None and (new.id, new.body) == (follow, b"v3")


def test_a_waiting_job_is_replaced_in_place_and_keeps_its_parents(fq: sqlq.Queue,
                                                                  clock: FakeClock) -> None:
    parent = fq.put(b"p", tube="p")
    child = fq.put(b"c1", unique_key="k", after=parent)
    assert fq.put(b"c2", unique_key="k", delay=5, on_conflict="replace") == child
    assert fq.stats_job(child)["state"] == "waiting"
    assert fq.links(child).parents == [parent]
    clock.advance(60)
    fq.delete(parent)
    assert fq.stats_job(child)["state"] == "delayed"  # the delay counts from the release
    clock.advance(6)
    job = fq.reserve(timeout=0)
    assert job is not None and (job.id, job.body) == (child, b"c2")


def test_publish_replaces_in_each_tube(q: sqlq.Queue) -> None:
    q.subscribe("orders", "a")
    q.subscribe("orders", "b")
    first = q.publish("orders", b"1", unique_key="k", on_conflict="replace")
    again = q.publish("orders", b"2", unique_key="k", delay=30, on_conflict="replace")
    assert again == first
    assert [q.peek(i).body for i in first] == [b"2", b"2"]  # type: ignore[union-attr]
    assert [q.stats_job(i)["state"] for i in first] == ["delayed", "delayed"]


def test_a_replace_wakes_a_blocked_reserve_when_it_makes_the_job_ready(q: sqlq.Queue,
                                                                      db_url: str) -> None:
    """A reserve blocked on another connection sees a delayed job made ready now, and one
    whose delay is moved sooner at its new time, not at the old one (the due-time rule,
    as postpone's)."""
    jid = q.put(b"x", unique_key="k", delay=3600)
    with sqlq.Queue(db_url, durability="normal") as other:
        got: list[tuple[sqlq.Job | None, float]] = []

        def wait() -> None:
            job = other.reserve(timeout=soon(10))
            got.append((job, time.monotonic()))

        waiter = threading.Thread(target=wait)
        waiter.start()
        time.sleep(0.2)  # the waiter is blocked (it would be woken either way)
        put_at = time.monotonic()
        q.put(b"sooner", unique_key="k", delay=1, on_conflict="replace")
        waiter.join(soon(10))
        job, at = got[0]
        assert job is not None and job.id == jid and job.body == b"sooner"
        assert 1 - 0.05 <= at - put_at <= soon(1)
        job.delete()


def test_a_replace_in_a_rolled_back_transaction_changes_nothing(db_url: str) -> None:
    with sqlq.Queue(db_url, durability="normal") as q:
        jid = q.put(b"old", unique_key="k", delay=60)
        with pytest.raises(RuntimeError), q.transaction() as tx:
            assert tx.put(b"new", unique_key="k", on_conflict="replace") == jid
            raise RuntimeError("rolled back")
        job = q.peek(jid)
        assert job is not None and job.body == b"old" and job.state == "delayed"
        with q.transaction() as tx:
            tx.put(b"new", unique_key="k", on_conflict="replace")
        assert q.peek(jid).body == b"new"  # type: ignore[union-attr]


def test_two_transactions_racing_on_a_free_key_leave_one_job(db_url: str) -> None:
    """The first transaction puts the key's job; the second, blocked until it commits
    (PostgreSQL: on the unique index; SQLite: on the write lock), then replaces that job
    in place instead of adding one or losing its body."""
    with sqlq.Queue(db_url, durability="normal") as a, \
            sqlq.Queue(db_url, durability="normal") as b:
        a.put(b"warm")  # both have their connections and schema
        b.peek(1)
        done: list[int] = []
        with a.transaction() as tx:
            first = tx.put(b"a", unique_key="k", on_conflict="replace")
            racer = threading.Thread(target=lambda: done.append(
                b.put(b"b", unique_key="k", on_conflict="replace")))
            racer.start()
            racer.join(0.5)
            assert racer.is_alive() and not done  # blocked by the open transaction
        racer.join(soon(5))
        assert done == [first]
        job = a.peek(first)
        assert job is not None and job.body == b"b"
        assert a.stats_tube("default")["current-jobs-ready"] == 2  # "warm" and the key's


def test_task_options_take_on_conflict(db_url: str) -> None:
    with sqlq.Queue(db_url, durability="normal") as q:

        @q.task
        def sync(account: int) -> None: ...

        first = sync.options(unique_key="sync:1", delay=30, on_conflict="replace").put(1)
        again = sync.options(unique_key="sync:1", delay=30, on_conflict="replace").put(2)
        assert again == first
        assert q.peek(first).json()["args"] == [2]  # type: ignore[union-attr]
        with pytest.raises(ValueError, match="on_conflict"):
            sync.options(unique_key="k", on_conflict="merge")
        with pytest.raises(ValueError, match="unique_key"):
            sync.options(on_conflict="replace")
        assert q.stats()["total-jobs"] == 1


def test_sqlq_put_through_the_applications_connection_replaces(db_url: str) -> None:
    with sqlq.Queue(db_url, durability="normal") as q:
        jid = q.put(b"old", unique_key="k", delay=60)
    if db_url.startswith("postgresql"):
        import psycopg

        with psycopg.connect(db_url) as conn:
            with conn.transaction():
                assert sqlq.put(conn, b"new", unique_key="k", on_conflict="replace") == jid
    else:
        import sqlite3

        conn = sqlite3.connect(db_url, isolation_level=None)
        try:
            assert sqlq.put(conn, b"new", unique_key="k", on_conflict="replace") == jid
        finally:
            conn.close()
    with sqlq.Queue(db_url, durability="normal") as q:
        job = q.peek(jid)
        assert job is not None and job.body == b"new" and job.state == "ready"



def test_a_replace_moves_the_held_job_to_the_puts_group(q: sqlq.Queue) -> None:
    """The group is one of the options a replace changes in place (None: no group)."""
    first = q.put(b"v1", unique_key="k", group="a")
    assert q.put(b"v2", unique_key="k", on_conflict="replace", group="b") == first
    assert q.stats_job(first)["group"] == "b"
    assert q.put(b"v3", unique_key="k", on_conflict="replace") == first
    assert q.stats_job(first)["group"] is None
    running = q.reserve(timeout=0)
    assert running is not None and running.id == first
    follow = q.put(b"v4", unique_key="k", on_conflict="replace", group="c")
    assert follow != first and q.stats_job(follow)["group"] == "c"  # the follow-up's
