"""Importable tasks with durable steps (``--import tests.step_jobs``): the worker tests of
tests/integration/test_steps.py and the chaos runs of tests/system/test_steps_chaos.py.

Each step's function appends a line to a side file when it completes ("<job> <step>"),
so a test counts how often each one ran; the exactly-once variant writes its line into
the queue's own database (a ``ledger`` table) in the step's transaction instead.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import IO

import sqlq

from .workers import private_db

q = sqlq.Queue(os.environ.get("SQLQ_DB") or private_db())
#: The steps of a five-step task.
FIVE = ("one", "two", "three", "four", "five")


def _append(path: str, line: str) -> None:
    with open(path, "a") as f:
        f.write(line + "\n")
        f.flush()
        os.fsync(f.fileno())  # a SIGKILL right after must not lose the count


def _job() -> sqlq.Job:
    job = sqlq.current_job()
    assert job is not None
    return job


@q.task(tube="steps", retries=2, backoff=0.05)
def twice_failing(path: str) -> str:
    """Two steps, then a failure on the first run: the retry skips both."""
    job = _job()
    for name in ("a", "b"):
        job.step(name, _append, path, f"{job.id} {name}")
    if job.reserves == 1:
        raise RuntimeError("fails once, after its steps")
    return "done"


@q.task(tube="steps", retries=0)
def snoozing(path: str) -> None:
    """A step, then a snooze on its first run (its attempt is not counted)."""
    job = _job()
    job.step("before", _append, path, f"{job.id} before")
    if job.cursor("snoozed") is None:
        job.save_cursor("snoozed", True)
        job.snooze(0.2)
        return
    _append(path, f"{job.id} after {job.reserves}")


@q.task(tube="steps", retries=0)
async def awaiting(path: str) -> str:
    """An async task: its step's function is awaited."""
    job = _job()

    async def work() -> str:
        await asyncio.sleep(0)
        _append(path, f"{job.id} awaited")
        return "value"

    return str(await job.step("await", work))


@q.task(tube="chaos", retries=1000, backoff=0.01, ttr=30)
def five_steps(path: str, pause: float) -> None:
    """Five steps, each a short piece of work that appends its line when it completes."""
    job = _job()
    for name in FIVE:
        job.step(name, _slow_append, path, f"ran {job.id} {name}", pause)
        _append(path, f"kept {job.id} {name}")  # step returned: its record is committed


def _slow_append(path: str, line: str, pause: float) -> None:
    """The work (its line, durable), between two halves of a pause: a kill in the second
    half is the crash after the work and before its record that at-least-once repeats."""
    import time

    time.sleep(pause / 2)
    _append(path, line)
    time.sleep(pause / 2)


@q.task(tube="chaos", retries=1000, backoff=0.01, ttr=30)
def five_steps_exactly_once(path: str, pause: float) -> None:
    """Five steps whose work is a row of ``ledger`` in the queue's own database, written
    in the step's transaction (step(conn=tx)): each committed at most once. Each try
    appends "tried J S" to the side file first (tries minus rows: those a kill undid)."""
    import time

    job = _job()
    for name in FIVE:
        with q.transaction() as tx:
            job.step(name, _ledger, path, tx, job.id, name, pause, conn=tx)
        time.sleep(pause)


def _ledger(path: str, tx: sqlq.Transaction, job_id: int, name: str, pause: float) -> None:
    import time

    _append(path, f"tried {job_id} {name}")
    time.sleep(pause / 2)
    mark = "%s" if "://" in q.path else "?"  # the backend's own parameter style
    tx.execute(f"INSERT INTO ledger (job_id, step) VALUES ({mark}, {mark})", (job_id, name))
    time.sleep(pause / 2)  # a kill here rolls the row back with the step's record


@q.task(tube="chaos", retries=1000, backoff=0.01, ttr=60)
def import_rows(path: str, rows: int, every: int, gate: str = "") -> None:
    """An import of ``rows`` rows resuming at its cursor: each row processed appends its
    line ("<n>;"), in batches of ``every``: a batch is written (fsync'ed) before the
    cursor that passes it is saved. With ``gate`` (a file naming a row), the import stops
    before that row until the file names a later one or is removed: a test's SIGKILLs
    then land while it is under way however late the test gets a core."""
    job = _job()
    start = job.cursor("row", 0)
    with open(path, "a+") as out:
        if out.tell():  # a run cut mid-line leaves a fragment (no ";"): end its line
            out.seek(out.tell() - 1)
            if out.read(1) != "\n":
                out.write("\n")
        for first in range(start, rows, every):
            last = min(first + every, rows)
            n = first
            while n < last:  # the whole batch, unless the gate is inside it
                upto = min(last, _gate(gate, n, rows, out))
                out.write("".join(f"{i};\n" for i in range(n, upto)))
                n = upto
            out.flush()
            os.fsync(out.fileno())
            job.save_cursor("row", last)
    Path(path + ".done").write_text(str(job.id))


def _gate(gate: str, n: int, rows: int, out: IO[str]) -> int:
    """The row an import at row ``n`` may go up to (excluded): ``rows`` without a gate,
    else the gate's row once it is past ``n`` (the rows written so far fsync'ed first:
    a kill while it waits repeats them)."""
    import time

    waited = False
    while True:
        try:
            limit = int(Path(gate).read_text()) if gate else rows
        except FileNotFoundError:
            return rows
        if limit > n:
            return limit
        if not waited:
            out.flush()
            os.fsync(out.fileno())
            waited = True
        time.sleep(0.01)
