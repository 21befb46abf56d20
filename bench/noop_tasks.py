"""Tasks for the ``sqlq work`` rows (bench/targets.py: work_rate), and their stopwatch.

``sqlq work --import noop_tasks --tube bench`` imports this module in every worker
process, finds a task by name and runs it. Each call ends by writing (first call's
time, this call's time, calls so far) to a small file per process in
``$SQLQ_BENCH_STAMPS``: the bench reads the drain's end from the last write of
every process, so the figure is the draining rate without the interpreter's
start-up or the supervisor's shutdown, whatever the worker does between jobs
(prefetching, acknowledging in batches). The import itself leaves a ``ready-PID``
marker there, so the bench can wait for every process before it puts the jobs.
"""

from __future__ import annotations

import os
import struct
import time

import sqlq

q = sqlq.Queue(os.environ.get("SQLQ_BENCH_DB") or os.environ["SQLQ_DB"],
               **({} if "://" in os.environ.get("SQLQ_BENCH_DB", "") else
                  {"durability": "normal"}))
# (the worker sets its own durability with --durability; puts here are setup)

STAMPS = os.environ.get("SQLQ_BENCH_STAMPS", "")
STAMP = struct.Struct("ddq")  # first call, last call (time.monotonic), calls
_fd = -1
_first = 0.0
_calls = 0

if STAMPS:
    open(os.path.join(STAMPS, f"ready-{os.getpid()}"), "w").close()


def _stamp() -> None:
    global _fd, _first, _calls
    now = time.monotonic()
    if _fd < 0:
        if not STAMPS:
            return
        _fd = os.open(os.path.join(STAMPS, f"calls-{os.getpid()}"), os.O_CREAT | os.O_WRONLY, 0o600)
        _first = now
    _calls += 1
    os.pwrite(_fd, STAMP.pack(_first, now, _calls), 0)


@q.task(tube="bench")
def noop() -> None:
    _stamp()


@q.task(tube="bench")
def pause(ms: float) -> None:
    time.sleep(ms / 1000)
    _stamp()


def put_many(n: int, sleep_ms: float = 0.0) -> None:
    """n jobs of one task in one transaction: the workers see them all at once."""
    body = pause.message(sleep_ms) if sleep_ms else noop.message()
    q.put_many([body] * n, tube="bench")
