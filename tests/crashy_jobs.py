"""A task module that imports in the supervisor but not in its workers: a crash loop."""

from __future__ import annotations

import os

import sqlq

if os.environ.get("SQLQ_SUPERVISOR_PID"):
    raise RuntimeError("this module fails to import in a worker")

q = sqlq.Queue(os.environ["SQLQ_DB"])


@q.task()
def never() -> None:
    """Never run."""
