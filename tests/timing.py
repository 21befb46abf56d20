"""The suite's one timing constant.

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
