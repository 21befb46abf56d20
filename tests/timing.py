"""The suite's one timing constant, and the fake clock.

Tests assert that things happen *soon* (a woken worker, an expired timeout) and that
they do not happen *early*. "Early" is exact: a timeout of 1 s never fires before 1 s,
however busy the machine. "Soon" is not: on a loaded 2-core machine a process can wait
a second or more for a core. Every upper bound in the suite is therefore the nominal
time plus :data:`SLACK`, and every "wait until" gives up after a multiple of it, so the
whole suite's tolerance is turned by one knob (``SQLQ_TEST_SLACK=5 make test`` on a
machine slower still).
"""

from __future__ import annotations

import os

#: Seconds a busy machine may add to anything a test expects "now".
SLACK: float = float(os.environ.get("SQLQ_TEST_SLACK", "2"))


def soon(nominal: float = 0.0) -> float:
    """The upper bound for something due ``nominal`` seconds from now."""
    return nominal + SLACK


#: How long ``wait_for`` waits for something that should happen soon.
PATIENCE: float = 10 * SLACK


class FakeClock:
    """Milliseconds since the epoch that move only when a test says so: a Queue's
    ``clock=`` (the ``clock`` fixture, and ``fq`` driven by it)."""

    def __init__(self, start_ms: int = 1_700_000_000_000) -> None:
        self.now = start_ms

    def __call__(self) -> int:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += int(seconds * 1000)
