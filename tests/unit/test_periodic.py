"""``@q.periodic``: slots, and exactly one job per slot however many workers run."""

from __future__ import annotations

from datetime import datetime

import pytest

import sqlq
from sqlq.tasks.periodic import Schedule
from sqlq.work.scheduler import enqueue_slot, slot_key

pytestmark = pytest.mark.timeout(60)


def test_every_slots_are_aligned_on_the_epoch() -> None:
    s = Schedule(every=300)
    assert s.slot_at(1_700_000_123_456) == 1_700_000_100_000
    assert s.next_slot(1_700_000_123_456) == 1_700_000_400_000
    assert s.slot_at(1_700_000_100_000) == 1_700_000_100_000  # a slot contains its start
    assert s.next_slot(1_700_000_100_000) == 1_700_000_400_000
    assert Schedule(every=0.25).next_slot(1000) == 1250


def test_cron_slots_are_matches_in_local_time() -> None:
    s = Schedule(cron="*/5 * * * *")
    t = int(datetime(2024, 3, 1, 10, 7, 30).timestamp() * 1000)
    assert s.slot_at(t) == int(datetime(2024, 3, 1, 10, 5).timestamp() * 1000)
    assert s.next_slot(t) == int(datetime(2024, 3, 1, 10, 10).timestamp() * 1000)
    exact = int(datetime(2024, 3, 1, 10, 5).timestamp() * 1000)
    assert s.slot_at(exact) == exact
    assert s.next_slot(exact) == int(datetime(2024, 3, 1, 10, 10).timestamp() * 1000)


@pytest.mark.parametrize("kwargs, error", [
    ({}, TypeError), ({"every": 5, "cron": "* * * * *"}, TypeError),
    ({"every": 0}, ValueError), ({"every": -1}, ValueError), ({"every": "5"}, ValueError),
    ({"cron": "61 * * * *"}, ValueError), ({"cron": "every day"}, ValueError),
])
def test_bad_schedules_are_refused(kwargs: dict[str, object], error: type[Exception]) -> None:
    with pytest.raises(error):
        Schedule(**kwargs)  # type: ignore[arg-type]


def test_periodic_tasks_take_no_arguments(q: sqlq.Queue) -> None:
    with pytest.raises(TypeError, match="no arguments"):
        @q.periodic(every=60)
        def needs(x: int) -> None: ...  # type: ignore[misc]


def test_a_slot_is_enqueued_once_even_after_its_job_is_deleted(q: sqlq.Queue,
                                                              db_url: str) -> None:
    @q.periodic(every=60, name="test.cleanup", tube="cron")
    def cleanup() -> None: ...

    other = sqlq.Queue(db_url)  # a second process's view
    first = enqueue_slot(q, cleanup, 60_000)
    assert first is not None
    assert enqueue_slot(other, cleanup, 60_000) is None  # the job is live
    job = q.peek(first)
    assert job is not None and job.unique_key == slot_key(cleanup, 60_000) and job.tube == "cron"
    q.delete(first)
    assert enqueue_slot(other, cleanup, 60_000) is None  # its key is free, the slot is not
    assert enqueue_slot(other, cleanup, 0) is None  # nor any earlier one
    assert enqueue_slot(other, cleanup, 120_000) is not None
    other.close()
