"""The jobs a prefetching worker holds (sqlq/work/prefetch.py's Holding), on a clock the
test moves: each is touched 80% into its lease, and a touch cut off by a lost connection
is tried again soon, neither at once in a loop nor a heartbeat later. The worker that
holds them is tested as a process in tests/integration/test_prefetch.py."""

from __future__ import annotations

from typing import cast

import pytest

from sqlq.errors import Disconnected
from sqlq.model import Job
from sqlq.work.prefetch import Holding

from .test_heartbeat import START_MS, Clock


class HeldJob:
    """What Holding reads of a held job, and a touch that moves its lease (or fails)."""

    def __init__(self, clock: Clock, ttr: float) -> None:
        self.id, self.tube, self.ttr, self.clock = 7, "t", ttr, clock
        self.reserved_until = START_MS + round(ttr * 1000)
        self.touches = 0
        self.fail: Exception | None = None

    def touch(self) -> None:
        self.touches += 1
        if self.fail is not None:
            raise self.fail
        self.reserved_until = self.clock() + round(self.ttr * 1000)


def test_a_held_job_cut_off_from_the_database_is_touched_again_a_second_later() -> None:
    clock = Clock()
    job = HeldJob(clock, 10)
    held = Holding(clock)
    held.add([cast(Job, job)])
    assert held.touch_in() == pytest.approx(8.0)
    clock.now += 8000
    job.fail = Disconnected("the database went away")
    held.touch_due()
    assert job.touches == 1 and held.waiting  # kept: its lease stands
    assert held.touch_in() == pytest.approx(1.0)  # not 0 (a loop), nor after the lease
    held.touch_due()
    assert job.touches == 1  # not yet due again
    clock.now += 1000
    held.touch_due()
    assert job.touches == 2 and held.touch_in() == pytest.approx(0.5)  # halfway to its end
    job.fail = None
    clock.now += 500
    held.touch_due()
    assert job.touches == 3 and held.touch_in() == pytest.approx(8.0)  # touched: a new lease
