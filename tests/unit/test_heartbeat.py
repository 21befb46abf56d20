"""The policy for a running job (sqlq/work/heartbeat.py), on a clock the test moves: when a
job is touched, stopped or reported, and how long a stopping worker's grace lasts. The
workers that follow it are tested as processes in tests/integration/test_*worker.py."""

from __future__ import annotations

import logging
from typing import cast

import pytest

from sqlq.errors import Disconnected, JobLost
from sqlq.model import Job
from sqlq.work.heartbeat import HEARTBEAT, STOP, TOUCH, Grace, Heartbeat
from sqlq.work.runner import kill_margin

START_MS = 1_700_000_000_000


class Clock:
    """The queue's clock (ms), moved by the test."""

    def __init__(self) -> None:
        self.now = START_MS

    def __call__(self) -> int:
        return self.now


class StubJob:
    """What the policy reads of a reserved job, and its touch."""

    def __init__(self, ttr: float, fail: Exception | None = None) -> None:
        self.id, self.tube, self.reserves, self.ttr = 7, "t", 1, ttr
        self.reserved_until = START_MS + round(ttr * 1000)
        self.touches = 0
        self.fail = fail

    def touch(self) -> None:
        if self.fail is not None:
            raise self.fail
        self.touches += 1


def beat(job: StubJob, clock: Clock, *, keepalive: bool = False,
         stoppable: bool = False) -> Heartbeat:
    return Heartbeat(cast(Job, job), "task", keepalive, stoppable, clock, 0.0)


def test_a_job_with_keepalive_is_touched_each_time_80_percent_of_its_ttr_passes() -> None:
    job, clock = StubJob(10), Clock()
    b = beat(job, clock, keepalive=True)
    assert b.wait(0.0) == pytest.approx(HEARTBEAT * 10)
    assert b.step(7.9) is None
    assert b.step(8.0) == TOUCH
    assert b.step(8.1) is None  # the next one is 80% of the TTR later
    assert b.wait(8.1) == pytest.approx(7.9)
    b.touch()
    assert job.touches == 1 and b.keepalive
    assert b.step(16.0) == TOUCH


def test_the_first_touch_comes_80_percent_into_the_lease_of_a_job_started_late() -> None:
    """A job started 2 s after its claim (held in a batch, or on a busy machine) is first
    touched 8 s into its 10 s lease, 6 s into its run: 8 s into its run was as the lease
    ran out, when another worker could take it (a keepalive test saw the job run twice)."""
    job, clock = StubJob(10), Clock()
    clock.now += 2000
    b = beat(job, clock, keepalive=True)
    assert b.wait(0.0) == pytest.approx(6.0)
    assert b.step(5.9) is None and b.step(6.0) == TOUCH
    assert b.wait(6.0) == pytest.approx(8.0)  # then 80% of the TTR after each touch
    late, later = StubJob(10), Clock()
    later.now += 9000  # started with a tenth of its lease left: touched at once
    assert beat(late, later, keepalive=True).step(0.0) == TOUCH


def test_a_lost_touch_ends_the_keepalive_and_a_disconnected_one_does_not(
        caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, "sqlq.worker")
    down = beat(StubJob(10, Disconnected("the database went away")), Clock(), keepalive=True)
    down.touch()
    assert down.keepalive
    assert "job 7 task: could not touch it (the database went away)" in caplog.text
    lost = beat(StubJob(10, JobLost()), Clock(), keepalive=True)
    lost.touch()
    assert not lost.keepalive
    assert "job 7 task lost its reservation while running; it may run again" in caplog.text
    assert [r.outcome for r in caplog.records if "lost" in r.getMessage()] == ["lost"]  # type: ignore[attr-defined]


def test_a_touch_cut_off_by_a_lost_connection_is_tried_again_before_the_lease_ends() -> None:
    """The lease stands while the database is away: the touch is tried again a second
    later (halfway to the lease's end if that is sooner), not 80% of the TTR later,
    after the lease has run out and another worker may have taken the job."""
    job, clock = StubJob(10), Clock()
    b = beat(job, clock, keepalive=True)
    job.fail = Disconnected("the database went away")
    clock.now += 8000
    assert b.step(8.0) == TOUCH
    b.touch()
    assert b.wait(8.0) == pytest.approx(1.0)  # 2 s of lease left: a second later
    assert b.step(8.9) is None and b.step(9.0) == TOUCH
    clock.now += 1000
    b.touch()  # 1 s left: halfway to the lease's end
    assert b.wait(9.0) == pytest.approx(0.5)
    job.fail = None
    clock.now += 500
    assert b.step(9.5) == TOUCH
    b.touch()
    assert job.touches == 1 and b.wait(9.5) == pytest.approx(HEARTBEAT * 10)
    short, at = StubJob(2, Disconnected("gone")), Clock()
    s = beat(short, at, keepalive=True)
    at.now += 1600
    assert s.step(1.6) == TOUCH
    s.touch()
    assert s.wait(1.6) == pytest.approx(0.2)  # 0.4 s of a 2 s TTR left


def test_a_run_that_can_be_stopped_is_stopped_at_the_kill_margin_before_its_ttr() -> None:
    job, clock = StubJob(10), Clock()
    b = beat(job, clock, stoppable=True)
    margin = kill_margin(10)
    assert b.wait(0.0) == pytest.approx(10 - margin)
    clock.now += round((10 - margin) * 1000) - 1
    assert b.step(0.0) is None
    clock.now += 1
    assert b.step(0.0) == STOP
    assert b.stop_reason("killed") == "killed: still running when its TTR of 10s ran out"


def test_a_run_that_cannot_be_stopped_is_reported_once_when_its_ttr_has_run_out(
        caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, "sqlq.worker")
    job, clock = StubJob(2.5), Clock()
    b = beat(job, clock, stoppable=True)
    clock.now += 2000  # past the kill margin: the kill did not work
    assert b.step(0.0) == STOP
    b.unstoppable()
    assert b.step(0.0) is None and not caplog.records  # its TTR has not run out yet
    assert b.wait(0.0) == pytest.approx(0.5)
    clock.now += 500
    assert b.step(0.0) is None and b.step(0.0) is None
    assert [r.getMessage() for r in caplog.records] == [
        "job 7 task is still running past its TTR of 2.5s: it may be run again elsewhere "
        "(give the task keepalive=True)"]
    assert b.wait(0.0) is None  # nothing more to do


def test_grace_starts_with_the_stop_request_and_a_hurry_ends_it() -> None:
    grace = Grace(5)
    grace.update(1.0, False, False)
    assert grace.left(1.0) is None and not grace.over(100.0)
    grace.update(2.0, True, False)
    grace.update(4.0, True, False)  # the period runs from the first request
    assert grace.left(3.0) == 4.0 and not grace.over(6.9) and grace.over(7.0)
    grace.update(3.0, True, True)
    assert grace.over(3.0) and grace.left(3.0) == 0
    hurried = Grace(30)
    hurried.update(1.0, True, True)
    assert hurried.over(1.0)


def test_an_outage_says_its_first_cut_off_touch_and_the_touch_that_gets_through(
        caplog: pytest.LogCaptureFixture) -> None:
    """A touch gives up at its lease's end (Dispatcher.within), so an outage brings a try
    a second: the first is a warning, the next ones debug lines, and the touch that gets
    through again says how many were cut off."""
    caplog.set_level(logging.DEBUG, "sqlq.worker")
    job = StubJob(10, Disconnected("the database went away"))
    b = beat(job, Clock(), keepalive=True)
    for _ in range(5):
        b.touch()
    cut = [r for r in caplog.records if "could not touch it" in r.getMessage()]
    assert [r.levelno for r in cut] == [logging.WARNING] + [logging.DEBUG] * 4
    job.fail = None
    b.touch()
    assert "job 7 task touched again, after 5 tries cut off" in caplog.text
    job.fail = Disconnected("away again")
    b.touch()
    assert [r.levelno for r in caplog.records
            if "could not touch it (away again)" in r.getMessage()] == [logging.WARNING]
