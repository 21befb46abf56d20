"""A periodic task for tests/integration/test_periodic.py (kept apart from tests/jobs.py so that the
other worker tests do not run a scheduler)."""

from __future__ import annotations

import os
import time

import sqlq

from .workers import private_db

q = sqlq.Queue(os.environ.get("SQLQ_DB") or private_db())


@q.periodic(every=1, tube="ticks")
def tick() -> None:
    """Note who ran it and when."""
    with open(os.environ["TICKS"], "a") as f:
        f.write(f"{os.getpid()} {time.time():.3f}\n")
