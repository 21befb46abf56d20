"""The library's drain loops, one job at a time and in batches (bench_batch.py, targets.py).

Each takes an open ``sqlq.Queue`` holding ``n`` ready jobs and the batch size, drains
it with ``timeout=0`` and returns how many jobs it handled.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

Loop = Callable[[Any, int, int], int]


def one_at_a_time(q: Any, n: int, batch: int) -> int:
    """``reserve(delete=job)``: the previous job's delete and the next claim, one commit."""
    done = 0
    job = q.reserve(timeout=0)
    while job is not None:
        done += 1
        job = q.reserve(timeout=0, delete=job)
    return done


def reserve_then_delete(q: Any, n: int, batch: int) -> int:
    """What a new user writes: ``reserve(timeout=0)``, then ``job.delete()``: two commits."""
    done = 0
    while (job := q.reserve(timeout=0)) is not None:
        job.delete()
        done += 1
    return done


def many_then_delete(q: Any, n: int, batch: int) -> int:
    """``reserve_many(batch)``, then ``delete_many(jobs)``: two commits per batch."""
    done = 0
    jobs = q.reserve_many(batch, timeout=0)
    while jobs:
        done += len(jobs)
        q.delete_many(jobs)
        jobs = q.reserve_many(batch, timeout=0)
    return done


def many_with_delete(q: Any, n: int, batch: int) -> int:
    """``reserve_many(batch, delete=jobs)``: one commit per batch."""
    done = 0
    jobs = q.reserve_many(batch, timeout=0)
    while jobs:
        done += len(jobs)
        jobs = q.reserve_many(batch, timeout=0, delete=jobs)
    return done


LOOPS: dict[str, Loop] = {
    "reserve(delete=job)": one_at_a_time,
    "reserve_many+delete_many": many_then_delete,
    "reserve_many(delete=jobs)": many_with_delete,
}
