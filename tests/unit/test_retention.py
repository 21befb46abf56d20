"""Retention for everything that grows (issue 39; the table in docs/operations.md): each
table filled past its bound, and held there. Finished records and results are in
test_finished.py, attempts in test_attempts.py, the throughput history and the workers
registry in tests/integration/test_workers_registry.py; here what a worker's beat prunes,
cancellations and subscriptions. On every backend."""

from __future__ import annotations

import os
from typing import Any

import pytest

import sqlq
from sqlq.control import KEEP_CANCELLED_MS
from sqlq.work.presence import Presence
from tests.timing import FakeClock

COUNTS = {name: f"SELECT count(*) FROM {name}" for name in (  # noqa: S608 - our names
    "sqlq_finished", "sqlq_cancelled", "sqlq_subscriptions")}


def _count(q: sqlq.Queue, table: str) -> int:
    """Rows of one of sqlq's tables, read through the application's own SQL."""
    with q.transaction() as tx:
        return int(tx.execute(COUNTS[table])[0][0])


def _finish(q: sqlq.Queue, n: int) -> None:
    q.put_many([b"%d" % i for i in range(n)])
    for job in q.reserve_many(n, timeout=0):
        job.delete()


def test_a_workers_beat_prunes_finished_records(fq: sqlq.Queue, clock: FakeClock) -> None:
    fq.retention(max_count=10)
    _finish(fq, 30)
    assert _count(fq, "sqlq_finished") == 30
    presence = Presence(fq, ["default"])
    try:
        presence.beat()  # the first beat sweeps and prunes
        assert _count(fq, "sqlq_finished") == 10
        _finish(fq, 30)
        presence.beat()  # within the minute: not again
        assert _count(fq, "sqlq_finished") == 40
    finally:
        presence.stop()


def test_a_beat_prunes_a_second_at_most_and_goes_on_at_the_next(fq: sqlq.Queue,
                                                               clock: FakeClock) -> None:
    _finish(fq, 12)
    clock.advance(8 * 86400)
    first = fq.operations.prune(batch=5, budget_s=0)  # one batch, then out of time
    assert (first["finished"], first["more"]) == (5, 1)
    then = fq.operations.prune(batch=5)
    assert (then["finished"], then["more"]) == (7, 0)


def test_cancellations_are_kept_an_hour_past_their_lease(fq: sqlq.Queue,
                                                         clock: FakeClock) -> None:
    for _ in range(5):
        fq.put(b"x", ttr=60)
        job = fq.reserve(timeout=0)
        assert job is not None
        fq.cancel(job.id)
    assert _count(fq, "sqlq_cancelled") == 5
    clock.advance(60 + KEEP_CANCELLED_MS / 1000 + 1)
    fq.cancel(fq.put(b"y"))  # each cancel purges the expired ones
    assert _count(fq, "sqlq_cancelled") == 0


def test_subscriptions_are_one_row_per_topic_and_tube(q: sqlq.Queue) -> None:
    for _ in range(50):
        q.subscribe("orders", "billing")
        q.subscribe("orders", "audit")
    assert _count(q, "sqlq_subscriptions") == 2
    q.unsubscribe("orders", "audit")
    assert _count(q, "sqlq_subscriptions") == 1


def test_a_record_already_there_gives_way(q: sqlq.Queue) -> None:
    """A record with a live job's id (a copy into a file that had one) never blocks the
    job's end: the new record replaces it."""
    jid = q.put(b"x")
    q.delete(jid)
    again: Any = q.put(b"y")
    with q.transaction() as tx:
        mark = "%s" if "postgres" in type(q.backend).__module__ else "?"
        tx.execute(f"UPDATE sqlq_finished SET id = {mark} WHERE id = {mark}", (again, jid))
    q.cancel(again)
    record = q.finished(again)
    assert record is not None and record.outcome == "cancelled" and q.peek(again) is None


@pytest.mark.sqlite_only
def test_a_new_file_gives_its_space_back_after_a_big_drain(fq: sqlq.Queue, db_path: str,
                                                           clock: FakeClock) -> None:
    fq.put_many([b"x" * 4000] * 2000)  # 8 MB of bodies
    for job in fq.reserve_many(2000, timeout=0):
        job.delete()
    clock.advance(8 * 86400)
    fq.backend.maintain()  # the WAL into the file
    full = os.path.getsize(db_path)
    gone = fq.prune()
    assert gone["finished"] == 2000 and gone["pages"] > 1000
    fq.backend.maintain()
    assert os.path.getsize(db_path) < full / 3  # 1024 free pages (2 MB) are kept
    assert fq.prune()["pages"] == 0  # what is left is kept for the next jobs
