"""The trace column below the worker, on both backends, in the test's own process (no
tracer provider is set here: tests/integration/test_tracing.py runs the SDK in processes
of its own): an untraced put stores nothing, and every claim returns what a traced put
stored, the tracestate included."""

from __future__ import annotations

import pytest

import sqlq
from sqlq.core import tracing

pytestmark = pytest.mark.both_apis

HEADER = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01\ncongo=t61rcWkgMzE"


def _trace(q: sqlq.Queue, ids: list[int]) -> None:
    backend = q.backend  # the Queue's, under an AsyncQueue too (tests/asyncbridge.py)
    backend.write(lambda c: backend.store.jobs.set_trace(c, ids, HEADER))


def test_no_provider_means_no_spans_and_untraced_puts_store_nothing(q: sqlq.Queue) -> None:
    assert not tracing.active()
    q.put(b"a")
    q.put_many([b"b", b"c"])
    q.subscribe("topic", "default")
    q.publish("topic", b"d")
    assert [j.trace for j in q.reserve_many(4, timeout=0)] == [None] * 4


def test_every_claim_returns_the_stored_trace(q: sqlq.Queue) -> None:
    ids = [q.put(b"one"), q.put(b"two"), q.put(b"three"), q.put(b"four")]
    _trace(q, ids)
    one = q.reserve(timeout=0)  # the one-tube claim
    two = q.reserve(["default", "other"], timeout=0)  # several tubes
    three = q.reserve(timeout=0, delete=one)  # delete-and-claim
    four = q.reserve_job(ids[3])
    assert [j.trace for j in (one, two, three, four)] == [HEADER] * 4
    q.delete(two.id)
    q.delete(three.id)
    q.delete(four.id)
    batch = [q.put(b"five"), q.put(b"six")]
    _trace(q, batch)
    assert [j.trace for j in q.reserve_many(2, timeout=0)] == [HEADER, HEADER]


def test_job_trace_reads_what_the_put_stored(q: sqlq.Queue) -> None:
    """The dashboard's job page shows it (a peek leaves Job.trace None)."""
    traced, plain = q.put(b"traced"), q.put(b"plain")
    _trace(q, [traced])
    assert q.job_trace(traced) == HEADER and q.peek(traced).trace is None  # type: ignore[union-attr]
    assert q.job_trace(plain) is None
    assert q.job_trace(plain + 1) is None and q.job_trace(0) is None and q.job_trace(2**70) is None
    q.delete(traced)
    assert q.job_trace(traced) is None
