"""The counts kept per tube and state (migration 0005, issue 39) stay exact through every
verb that moves a job, a process that dies holding jobs among them: after a randomized
run of all of them, the kept counts equal a real COUNT(*) of the rows, and stats and
stats_tube (which read the kept counts plus what is due as of now) equal the counts
worked out from the rows themselves; then through a copy, a backup and a whole drain.
The checks that start no process are in tests/unit/test_job_counts.py."""

from __future__ import annotations

import random
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

import sqlq
from sqlq.copy import copy

from ..conftest import is_postgres, spawn
from ..kept_counts import TUBES, check_counts, read_counts
from ..timing import FakeClock

DIES_HOLDING = """
import os, sys, sqlq
q = sqlq.Queue(sys.argv[1], durability="normal")
q.reserve_many(3, ["a", "b", "c"], timeout=0)
os._exit(0)
"""

def _random_run(q: sqlq.Queue, url: str, clock: FakeClock, seed: int, steps: int) -> None:
    rnd = random.Random(seed)
    held: list[sqlq.Job] = []
    deaths = 0  # processes that die holding jobs: three a run show the reap (each costs one)
    for step in range(steps):
        tube = rnd.choice(TUBES)
        priority = rnd.choice((0, 100, 1023, 1024, 5000))
        verb = rnd.choice(("put", "put", "put_delayed", "put_unique", "put_many", "put_many_big",
                           "put_after", "reserve", "reserve", "reserve_many", "delete",
                           "delete_many", "delete_id", "release", "release_delayed", "bury",
                           "kick", "kick_job", "touch", "cancel", "postpone", "advance",
                           "dead_owner", "put_replace", "snooze"))
        if verb == "put":
            q.put(b"x", tube=tube, priority=priority)
        elif verb == "put_delayed":
            q.put(b"x", tube=tube, priority=priority, delay=rnd.choice((1, 5, 30)))
        elif verb == "put_unique":
            q.put(b"x", tube=tube, priority=priority, unique_key=str(rnd.randrange(4)))
        elif verb == "put_replace":  # debounce: the key's holder changed in place, or a
            # follow-up of a reserved or buried one
            q.put(b"x", tube=tube, priority=priority, unique_key=str(rnd.randrange(4)),
                  delay=rnd.choice((0, 0, 2)), on_conflict="replace")
        elif verb == "put_many":
            q.put_many([b"x"] * rnd.randrange(1, 5), tube=tube, priority=priority,
                       delay=rnd.choice((0, 0, 3)))
        elif verb == "put_many_big":  # past QUIET_BATCH: SQLite puts with its triggers off
            q.put_many([b"x"] * 70, tube=tube, priority=priority, delay=rnd.choice((0, 3)))
        elif verb == "put_after" and held:
            q.put(b"child", tube=tube, priority=priority, after=rnd.choice(held).id,
                  delay=rnd.choice((0, 2)))
        elif verb == "reserve":
            job = q.reserve(list(TUBES), timeout=0)
            if job is not None:
                held.append(job)
        elif verb == "reserve_many":
            held.extend(q.reserve_many(rnd.randrange(1, 8), list(TUBES), timeout=0))
        elif verb == "delete_many" and held:
            batch = [held.pop() for _ in range(min(len(held), 3))]
            _quietly(q.delete_many, batch)
        elif held and verb in ("delete", "release", "release_delayed", "bury", "touch",
                               "cancel", "snooze"):
            job = held.pop(rnd.randrange(len(held)))
            if verb == "delete":
                _quietly(job.delete)
            elif verb == "release":
                _quietly(job.release, priority=priority)
            elif verb == "release_delayed":
                _quietly(job.release, delay=rnd.choice((1, 10)))
            elif verb == "bury":
                _quietly(job.bury, priority=priority)
            elif verb == "touch":
                _quietly(job.touch)
                held.append(job)
            elif verb == "snooze":
                _quietly(job.snooze, rnd.choice((0, 3)))
            else:
                _quietly(q.cancel, job.id)
        elif verb in ("delete_id", "kick_job", "cancel", "postpone"):
            job_id = rnd.randrange(1, step + 2)
            call = {"delete_id": q.delete, "kick_job": q.kick_job, "cancel": q.cancel,
                    "postpone": lambda i: q.postpone(i, rnd.choice((0, 4)))}[verb]
            _quietly(call, job_id)
        elif verb == "kick":
            q.kick(rnd.randrange(1, 20), tube)
        elif verb == "advance":  # delayed jobs come due, leases run out
            clock.advance(rnd.choice((1, 3, 30, 130)))
        elif verb == "dead_owner" and deaths < 3:  # dies holding jobs: reaped by a claim
            deaths += 1
            dying = spawn(DIES_HOLDING, url)
            assert dying.wait(timeout=60) == 0
        if step % 25 == 0:
            check_counts(url, clock(), q)


def _quietly(call: Any, *args: Any, **kwargs: Any) -> None:
    """A verb on a job that may be gone, expired or cancelled meanwhile: its error is the
    verb's answer, not the test's; what matters is what it left in the counts."""
    try:
        call(*args, **kwargs)
    except (sqlq.JobNotFound, sqlq.JobLost):
        pass


@pytest.mark.slow
@pytest.mark.parametrize("seed", [1, 2])
def test_kept_counts_equal_count_star_after_every_verb(db_url: str, clock: FakeClock,
                                                        seed: int, tmp_path: Path,
                                                        backend: str) -> None:
    with sqlq.Queue(db_url, durability="normal", clock=clock) as q:
        _random_run(q, db_url, clock, seed, 300)
        check_counts(db_url, clock(), q)
        copied = str(tmp_path / "copy.db")
        copy(db_url, copied, clock=clock)  # copy: the target counts what it received
        check_counts(copied)
        backup = tmp_path / "backup.db"
        q.backup(backup)  # a backup restored is a file opened as a queue
        check_counts(str(backup))
        with sqlq.Queue(str(backup), durability="normal", clock=clock) as restored:
            restored.put(b"after restore", tube="a")
            check_counts(str(backup), clock(), restored)
        # the whole drain: every job out, through the claim and the operator's delete
        while held := q.reserve_many(50, list(TUBES), timeout=0):
            q.delete_many(held)
        for tube in TUBES:
            while q.kick(1000, tube):
                pass
        for job_id in range(1, 100_000):
            if q.stats()["current-jobs-ready"] + q.stats()["current-jobs-delayed"] == 0:
                break
            _quietly(q.delete, job_id)
        check_counts(db_url, clock(), q)
    if not is_postgres(backend):
        assert read_counts(db_url)[0] == Counter()
