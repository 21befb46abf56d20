"""Tasks of tests/integration/test_pg_connect.py, in the documented module pattern: the
Queue is made at import (``sqlq work --import`` with the server down: reliability.md F13).
Each run appends its job's id and its argument to ``$SQLQ_TEST_OUT``, one write a line."""

from __future__ import annotations

import asyncio
import os

import sqlq

q = sqlq.Queue(os.environ["SQLQ_DB"])


def _note(text: str) -> None:
    job = sqlq.current_job()
    line = f"{job.id if job is not None else 0} {text}\n".encode()
    fd = os.open(os.environ["SQLQ_TEST_OUT"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        os.write(fd, line)
    finally:
        os.close(fd)


@q.task(tube="connect", ttr=600)
def note(text: str) -> None:
    """Say it ran."""
    _note(text)


@q.task(tube="connect-async", ttr=600)
async def anote(text: str) -> None:
    """Say it ran, after a moment on the loop (runs overlap under --concurrency)."""
    await asyncio.sleep(0.02)
    _note(text)
