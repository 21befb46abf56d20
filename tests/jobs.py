"""Importable task functions for the worker tests (``sqlq work --import tests.jobs``).

rq's idea: jobs the tests enqueue must live in a module a worker process can
import. The Queue opens ``$SQLQ_DB``, which the tests set for their workers; the
tests themselves enqueue with ``task.message(...)`` through their own Queue.
"""

from __future__ import annotations

import os
import time

import sqlq

from .workers import private_db

q = sqlq.Queue(os.environ.get("SQLQ_DB") or private_db())


def _append(path: str, line: str) -> None:
    with open(path, "a") as f:
        f.write(line + "\n")


@q.task()
def add(a: int, b: int) -> int:
    """A task with a result."""
    return a + b


@q.task()
def noop() -> None:
    """Nothing at all: the bench's task and the fast path (no result, one commit)."""


@q.task(tube="jobs")
def record(path: str, text: str) -> None:
    """Append a line to a file: proof that the task ran, and how many times."""
    _append(path, text)


@q.task(tube="jobs", retries=2, backoff=0.05)
def fail(path: str, message: str) -> None:
    """Fail every time, after noting the attempt."""
    _append(path, f"attempt {os.environ.get('SQLQ_ATTEMPT', '?')}")
    raise ValueError(message)


@q.task(tube="jobs", retries=3, backoff=0.05)
def flaky(path: str, failures: int) -> str:
    """Fail the first ``failures`` runs, then succeed."""
    _append(path, "run")
    with open(path) as f:
        runs = sum(1 for _ in f)
    if runs <= failures:
        raise RuntimeError(f"flaky run {runs}")
    return f"ok after {runs} runs"


@q.task(tube="slow", ttr=1, retries=1)
def slow(path: str, seconds: float) -> None:
    """Run longer than the TTR without a heartbeat."""
    _append(path, f"start {os.getpid()}")
    time.sleep(seconds)
    _append(path, f"end {os.getpid()}")


@q.task(tube="slow", ttr=2, retries=0, keepalive=True)
def slow_alive(path: str, seconds: float) -> None:
    """Run longer than the TTR, kept alive by the worker's heartbeat."""
    _append(path, f"start {os.getpid()}")
    time.sleep(seconds)
    _append(path, f"end {os.getpid()}")


@q.task(tube="slow", ttr=1, retries=1)
def overrun_once(path: str, seconds: float) -> None:
    """The first run outlives its TTR by ``seconds``; a second run finishes at once
    (reliability F3: the rerun deletes the job before the first run ends)."""
    first = not os.path.exists(path)
    _append(path, f"start {os.getpid()}")
    if first:
        time.sleep(seconds)
    _append(path, f"end {os.getpid()}")


@q.task(tube="slow", ttr=30, retries=1)
def nap(path: str, seconds: float) -> None:
    """Note the start, sleep, note the end: for stop, grace and SIGKILL tests."""
    _append(path, f"start {os.getpid()}")
    time.sleep(seconds)
    _append(path, f"end {os.getpid()}")


@q.task(tube="jobs")
def stop_me(path: str) -> None:
    """Note the run, then SIGTERM this worker: a stop requested in the middle of a batch."""
    import signal

    _append(path, f"stop {os.getpid()}")
    os.kill(os.getpid(), signal.SIGTERM)
