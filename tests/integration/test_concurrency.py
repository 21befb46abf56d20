"""Many processes on one file: exactly-once claims, and instant recovery of a dead holder."""

from __future__ import annotations

import asyncio
import signal
import time
from typing import Any

import pytest

import sqlq
from sqlq import Queue
from sqlq.verbs.engine import Engine
from tests.conftest import spawn
from tests.timing import soon
from tests.workers import drain_exactly_once

DRAINER = """
import sys, sqlq
q = sqlq.Queue(sys.argv[1], durability=sys.argv[2])
got = []
job = q.reserve(timeout=2)
while job is not None:
    got.append(job.id)
    job = q.reserve(timeout=1, delete=job)
print(" ".join(map(str, got)))
"""


@pytest.mark.slow
@pytest.mark.sql_ascii
def test_four_processes_drain_5000_jobs_exactly_once(db_url: str) -> None:
    shares = drain_exactly_once(db_url, DRAINER, 5000)
    print(f"\nshares of 5000 jobs across 4 processes: {shares}")
    with Queue(db_url) as q:
        assert q.stats()["current-jobs-ready"] == 0
        if "://" not in db_url:
            assert q.backend.read(
                lambda c: c.execute("PRAGMA integrity_check").fetchone()[0]) == "ok"


HOLDER = """
import sys, time, sqlq
q = sqlq.Queue(sys.argv[1])
job = q.reserve(timeout=5)
print(job.id, flush=True)
time.sleep(600)
"""


@pytest.mark.sql_ascii  # F8: a dead holder's token read back as bytes
def test_sigkilled_holder_gives_job_back_within_a_second(db_url: str) -> None:
    with Queue(db_url) as q:
        jid = q.put(b"precious", ttr=60)
        holder = spawn(HOLDER, db_url)
        assert int(holder.stdout.readline()) == jid
        assert q.reserve(timeout=0) is None  # held by a live process
        holder.send_signal(signal.SIGKILL)
        holder.wait(5)
        start = time.monotonic()
        job = q.reserve(timeout=5)
        assert job is not None and job.id == jid and job.body == b"precious"
        assert time.monotonic() - start < soon()
        assert job.reserves == 2


@pytest.mark.sql_ascii  # F8: a dead holder's token read back as bytes
def test_blocked_reserver_notices_a_holder_dying(db_url: str) -> None:
    """The waiter is already asleep when the holder dies: the owner file's close wakes it."""
    with Queue(db_url) as q:
        jid = q.put(b"x", ttr=60)
        holder = spawn(HOLDER, db_url)
        assert int(holder.stdout.readline()) == jid
        waiter = spawn("""
            import sys, time, sqlq
            q = sqlq.Queue(sys.argv[1])
            print("ready", flush=True)
            job = q.reserve(timeout=20)
            print(job.id, time.time(), flush=True)
        """, db_url)
        assert waiter.stdout.readline().strip() == "ready"
        time.sleep(0.3)
        killed_at = time.time()
        holder.send_signal(signal.SIGKILL)
        got, woke_at = waiter.stdout.readline().split()
        assert int(got) == jid
        assert float(woke_at) - killed_at < 1.0
        waiter.wait(5)


@pytest.mark.parametrize("face", ["sync", "async"])
def test_a_holder_dying_as_the_wait_begins_gives_its_job_back_at_once(
        db_url: str, face: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The holder dies after the reserve's first claim looked for dead holders and
    before its wait's watch began: no event tells of that death, so the wait's first
    look must look for dead holders itself (the blocking wait's, and the AsyncQueue's
    dispatcher's; test_sidecar met it in up to 3 runs of 10: the job came back only at
    its TTR)."""
    with Queue(db_url, durability="normal") as q:
        jid = q.put(b"x", ttr=60)
    holder = spawn(HOLDER, db_url)
    assert int(holder.stdout.readline()) == jid
    claim_first = Engine.claim_first

    def then_the_holder_dies(engine: Engine, *args: Any) -> sqlq.Job | None:
        found = claim_first(engine, *args)
        holder.kill()
        holder.wait(5)  # dead, its owner file closed, before the watch begins
        return found

    monkeypatch.setattr(Engine, "claim_first", then_the_holder_dies)
    start = time.monotonic()
    if face == "sync":
        with Queue(db_url, durability="normal") as q:
            got = q.reserve(timeout=10)
            got_id = None if got is None else got.id
    else:
        async def reserve() -> int | None:
            async with sqlq.AsyncQueue(db_url, durability="normal") as aq:
                job = await aq.reserve(timeout=10)
                return None if job is None else job.id

        got_id = asyncio.run(reserve())
    assert got_id == jid
    assert time.monotonic() - start < soon()


@pytest.mark.sql_ascii
def test_live_holder_keeps_its_job(db_url: str) -> None:
    with Queue(db_url) as q:
        q.put(b"x")
        holder = spawn(HOLDER, db_url)
        holder.stdout.readline()
        try:
            assert q.reserve(timeout=0.5) is None
        finally:
            holder.kill()
            holder.wait(5)


def test_lock_wait_bounds_how_long_a_write_waits_for_another_transaction(
        db_path: str) -> None:
    """Queue.lock_wait (what ``sqlq serve`` sets): a write refused by another connection's
    lock raises sqlq.Locked soon, having written nothing; None waits as before."""
    with Queue(db_path) as q, Queue(db_path) as other:
        q.put(b"one")
        q.lock_wait = 0.05
        with other.transaction():
            started = time.monotonic()
            with pytest.raises(sqlq.Locked, match="locked"):
                q.put(b"two")
            assert time.monotonic() - started < soon()
            assert q.peek_ready() is not None  # reads never wait for the lock
        assert q.put(b"three") == 2  # nothing was written, no id used
        q.lock_wait = None
        assert q.lock_wait is None
        with pytest.raises(ValueError, match="lock_wait"):
            q.lock_wait = -1
