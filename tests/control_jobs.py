"""Importable plain tasks for the cancel and timeout tests (``--import tests.control_jobs``).

Each notes its start in a file, then works until it is told to stop: through
``sqlq.current_job()`` (cancel, timeout) or ``job.touch()`` (cancel), noting how it ended.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import sqlq

from .workers import private_db

q = sqlq.Queue(os.environ.get("SQLQ_DB") or private_db())
#: How long a task works when nothing stops it (seconds): far past any test's patience.
LONG = 60.0


def _append(path: str, line: str) -> None:
    with open(path, "a") as f:
        f.write(line + "\n")


def _work(path: str, look: str) -> None:
    job = sqlq.current_job()
    assert job is not None
    _append(path, f"start {job.id}")
    ended = time.monotonic() + LONG
    try:
        while time.monotonic() < ended:
            time.sleep(0.02)  # a slice of work, then a look
            if look == "touch":
                job.touch()
            else:
                sqlq.current_job()
    except (sqlq.JobCancelled, sqlq.Timeout) as exc:
        _append(path, f"stopped {job.id} {type(exc).__name__}")
        raise
    _append(path, f"finished {job.id}")


@q.task(tube="control", retries=0)
def looks(path: str, how: str) -> None:
    """Work, looking at sqlq.current_job() (how="current") or touching (how="touch")."""
    _work(path, how)


@q.task(tube="control", retries=0)
def note(path: str, text: str) -> None:
    """Append a line: proof that the job after a cancelled one ran."""
    _append(path, text)


@q.task(tube="control", retries=0, timeout=1)
def overruns(path: str) -> None:
    """Work past its timeout of 1 s, looking at sqlq.current_job()."""
    _work(path, "current")


@q.task(tube="control", retries=0)
def reports(path: str) -> str:
    """Report progress, then wait for the test to say go (the file's line "go")."""
    job = sqlq.current_job()
    assert job is not None
    job.progress(0.5, "halfway")
    while "go" not in Path(path).read_text().split():
        time.sleep(0.02)
    job.progress(1.0, "done")
    return "ok"
