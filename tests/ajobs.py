"""Importable ``async def`` tasks for the async worker tests (``--import tests.ajobs``)."""

from __future__ import annotations

import asyncio
import os

import sqlq

from .workers import private_db

q = sqlq.Queue(os.environ.get("SQLQ_DB") or private_db())


def _append(path: str, line: str) -> None:
    with open(path, "a") as f:
        f.write(line + "\n")


@q.task(tube="async")
async def square(n: int) -> int:
    """A coroutine with a result."""
    await asyncio.sleep(0)
    return n * n


@q.task(tube="async", ttr=30)
async def nap(path: str, seconds: float) -> None:
    """Note the start, sleep without blocking the loop, note the end."""
    _append(path, f"start {os.getpid()}")
    try:
        await asyncio.sleep(seconds)
    except asyncio.CancelledError:
        _append(path, "cancelled")
        raise
    _append(path, f"end {os.getpid()}")


@q.task(tube="async", ttr=2, retries=0)
async def overrun(path: str) -> None:
    """Runs past its TTR of 2 s: cancelled just before it."""
    await nap.fn(path, 30)


@q.task(tube="async", ttr=4, keepalive=True)
async def kept(path: str, seconds: float) -> None:
    """Runs past its TTR, kept alive by the worker's touches (the first 3.2 s in, 0.8 s
    before the lease ends: with a TTR of 2, 0.4 s was once too little on a busy machine,
    and another process ran the job too)."""
    await nap.fn(path, seconds)


@q.task(tube="async", retries=1, backoff=0.1)
async def fail(message: str) -> None:
    """Fails every time: retried once, then buried with the last line."""
    await asyncio.sleep(0)
    raise ValueError(message)


@q.task(tube="async")
def plain(n: int) -> int:
    """A plain function among async tasks: it runs in a thread."""
    return n + 1


def _reserved() -> int:
    return int(q.stats()["current-jobs-reserved"])


@q.task(tube="batch")
async def record(path: str, tag: str, count: bool = True) -> None:
    """Note its tag and how many jobs are reserved as it runs (a batch held counts), or
    ``-`` without ``count``: the count is a query of some milliseconds, which on a busy
    machine makes every job look too long for the adaptive prefetch to batch."""
    _append(path, f"{tag} {_reserved() if count else '-'}")


@q.task(tube="batch", ttr=3)
async def held(path: str, seconds: float) -> None:
    """Note how many jobs are reserved as it starts, then sleep without blocking the loop."""
    _append(path, f"start {_reserved()}")
    await asyncio.sleep(seconds)
    _append(path, "end")
