"""Importable ``async def`` tasks for the cancel and timeout tests of the async worker."""

from __future__ import annotations

import asyncio
import os

import sqlq

from .workers import private_db

q = sqlq.Queue(os.environ.get("SQLQ_DB") or private_db())


def _append(path: str, line: str) -> None:
    with open(path, "a") as f:
        f.write(line + "\n")


@q.task(tube="control", retries=0)
async def sleeps(path: str) -> None:
    """Sleep for a minute, unless cancelled (noted)."""
    job = sqlq.current_job()
    assert job is not None
    _append(path, f"start {job.id}")
    try:
        await asyncio.sleep(60)
    except asyncio.CancelledError:
        _append(path, f"cancelled {job.id}")
        raise
    _append(path, f"finished {job.id}")


@q.task(tube="control", retries=0)
async def note(path: str, text: str) -> None:
    """Append a line: proof that the job after a cancelled one ran."""
    _append(path, text)


@q.task(tube="control", retries=0, timeout=1, keepalive=True, ttr=30)
async def overruns(path: str) -> None:
    """Sleep past its timeout of 1 s (kept alive: only the timeout stops it)."""
    await sleeps.fn(path)
