"""Importable tasks for the tracing tests (``sqlq work --import tests.traced_jobs``): a
sync task, one that always fails (retried once, then buried), and an async one."""

from __future__ import annotations

import os

from opentelemetry import trace

import sqlq

from .workers import private_db

q = sqlq.Queue(os.environ.get("SQLQ_DB") or private_db())


@q.task(tube="traced")
def ok(n: int) -> int:
    """Succeeds with a result."""
    return n + 1


@q.task(tube="traced")
def quiet() -> None:
    """Succeeds with nothing to store: deleted by the next claim."""


@q.task(tube="traced", retries=1, backoff=0)
def flaky() -> None:
    """Fails every time: a retry whose span links the first run's, then a burial."""
    raise RuntimeError("flaky fails")


@q.task(tube="atraced")
async def aok(n: int) -> int:
    """An async task, run by the event-loop worker."""
    return n * 2


@q.task(tube="atraced")
def nested(n: int) -> int:
    """A plain function in the async worker (run in a thread) making a span of its own:
    a child of the run's span."""
    with trace.get_tracer("tests.traced_jobs").start_as_current_span("nested work"):
        return n - 1
