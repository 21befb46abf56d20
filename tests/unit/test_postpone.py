"""``postpone``: the verb added as the worked example of docs/internals.md ("Where a new
verb goes"): a ready or delayed job made to wait from now, on every backend and both
APIs, through the Queue and the CLI."""

from __future__ import annotations

import pytest

import sqlq
from tests.timing import FakeClock


def test_a_ready_job_waits_then_comes_back(fq: sqlq.Queue, clock: FakeClock) -> None:
    jid = fq.put(b"x")
    fq.postpone(jid, 30)
    info = fq.stats_job(jid)
    assert info["state"] == "delayed" and info["delay"] == 30
    assert fq.reserve(timeout=0) is None
    clock.advance(31)
    job = fq.reserve(timeout=0)
    assert job is not None and job.id == jid


def test_a_delayed_job_gets_a_new_delay_from_now(fq: sqlq.Queue, clock: FakeClock) -> None:
    jid = fq.put(b"x", delay=10)
    clock.advance(5)
    fq.postpone(jid, 60)  # replaces the 5 s left
    clock.advance(10)
    assert fq.reserve(timeout=0) is None
    clock.advance(51)
    job = fq.reserve(timeout=0)
    assert job is not None and job.id == jid


def test_zero_makes_a_delayed_job_ready_now(fq: sqlq.Queue) -> None:
    jid = fq.put(b"x", delay=3600)
    fq.postpone(jid, 0)
    job = fq.reserve(timeout=0)
    assert job is not None and job.id == jid


def test_reserved_buried_and_unknown_jobs_are_refused_and_unchanged(q: sqlq.Queue) -> None:
    reserved = q.put(b"r")
    job = q.reserve(timeout=0)
    assert job is not None and job.id == reserved
    buried = q.put(b"b")
    other = q.reserve(timeout=0)
    assert other is not None
    other.bury()
    for jid in (reserved, buried, 999):
        with pytest.raises(sqlq.JobNotFound):
            q.postpone(jid, 10)
    assert q.stats_job(reserved)["state"] == "reserved"
    assert q.stats_job(buried)["state"] == "buried"


@pytest.mark.parametrize("delay", [-1, float("nan"), "10"])
def test_a_bad_delay_is_refused(q: sqlq.Queue, delay: object) -> None:
    jid = q.put(b"x")
    with pytest.raises((TypeError, ValueError)):
        q.postpone(jid, delay)  # type: ignore[arg-type]
    assert q.stats_job(jid)["state"] == "ready"
