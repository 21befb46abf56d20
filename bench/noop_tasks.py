"""No-op tasks for the ``sqlq work`` benchmark (bench/workloads.py: run_sqlq_work).

``sqlq work --import noop_tasks --tube bench --burst`` imports this module, finds
the task by name and runs it; the bench puts the jobs with ``put_many`` below.
"""

from __future__ import annotations

import os

import sqlq

q = sqlq.Queue(os.environ.get("SQLQ_BENCH_DB") or os.environ["SQLQ_DB"], durability="normal")
# (the worker sets its own durability with --durability; puts here are setup)


@q.task(tube="bench")
def noop() -> None:
    return None


def put_many(n: int) -> None:
    for _ in range(n):
        noop.put()
