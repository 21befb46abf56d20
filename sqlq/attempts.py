"""Failed attempts: what a worker keeps of each run of a job that did not succeed.

``sqlq work`` writes an :class:`Attempt` when a run fails, in the transaction that
releases the job for a retry or buries it, so the error of every failed run is kept
with the job: when it ran, on which worker, for how long, what became of the job,
and the full traceback (a task's, with files and lines; a command's stderr tail).
:meth:`sqlq.Queue.attempts` reads them back, ``sqlq peek ID`` and the dashboard's job
page show them, and :meth:`sqlq.Queue.stats_job` reports the latest.

Bounded: the last :data:`KEPT` attempts of a job, each traceback at most
:data:`TRACEBACK_LIMIT` characters (its start and its end, the middle left out) and
each message at most :data:`MESSAGE_LIMIT`. The rows go with their job: deleted,
completed, or replaced by nothing at all when it succeeds. A run that succeeds
writes nothing here.
"""

from __future__ import annotations

import os
import sys
import sysconfig
import traceback as tb
from dataclasses import dataclass, replace
from typing import Any

from .core import tracing
from .model import MESSAGE_LIMIT as MESSAGE_LIMIT  # re-exported: the bound of each message
from .model import cap as cap

#: Attempts kept per job: the last ten (older ones are deleted as newer ones come).
KEPT = 10
#: Characters of one traceback kept (8 KiB): its first quarter and its last three.
TRACEBACK_LIMIT = 8192

#: What became of the job after the attempt.
RETRIED, BURIED, LOST = "retried", "buried", "lost"
#: The ``error`` of a run stopped because its TTR ran out (a killed command, a
#: cancelled async task).
TIMED_OUT = "timed out"


@dataclass(frozen=True)
class Attempt:
    """One failed run of a job, as :meth:`sqlq.Queue.attempts` returns it.

    Attributes:
        job_id: the job.
        attempt: which run it was: the job's ``reserves`` when it ran (1 = the first).
        started_at: when the run started, ms since the epoch (as Job's times).
        duration: how long it ran, in seconds.
        host: the host name of the worker that ran it.
        pid: that worker's process id.
        outcome: what became of the job: ``retried`` (released to run again after a
            backoff), ``buried``, or ``lost`` (the reservation had run out before the
            run ended: the job was already back in the queue).
        error: what failed: the exception's type (``KeyError``,
            ``myapp.errors.PaymentDeclined``); a command's ``exit status 3`` or
            ``killed by SIGSEGV``; ``timed out`` for a run stopped at its TTR; empty
            when the worker buried the job without running it (unknown task, a body
            that is not a task call).
        message: one line, the bury reason of a buried job (``KeyError: 'sku'``).
        traceback: the full traceback of a task (files, lines, chained exceptions), a
            command's last lines of stderr, or empty.
        trace: the W3C ``traceparent`` of the run's OpenTelemetry span (its trace id and
            span id: find the run in a tracing UI), or None when it was not traced.
        location: where a task's exception was raised: the innermost frame of the
            project's own code (``myapp/tasks.py:41 in lookup``, see :func:`raised_at`);
            empty for a command, a run stopped at its TTR, or an attempt kept by an older
            sqlq. The Failed page groups by it.
    """

    job_id: int
    attempt: int
    started_at: int
    duration: float
    host: str
    pid: int | None
    outcome: str
    error: str
    message: str
    traceback: str
    trace: str | None = None
    location: str = ""

    @classmethod
    def from_row(cls, row: Any) -> Attempt:
        """An Attempt from a row of ``list_attempts`` (duration in ms)."""
        (job_id, attempt, started_at, duration, host, pid, outcome, error, message,
         traceback, trace, location) = row
        return cls(int(job_id), int(attempt), int(started_at), int(duration) / 1000, host,
                   None if pid is None else int(pid), outcome, error, message, traceback,
                   trace, location)

    def params(self) -> dict[str, Any]:
        """The row to store, bounded (the store's ``insert_attempt`` parameters)."""
        return {"job_id": self.job_id, "attempt": self.attempt, "started_at": self.started_at,
                "duration": round(self.duration * 1000), "host": self.host, "pid": self.pid,
                "outcome": self.outcome, "error": cap(self.error, MESSAGE_LIMIT),
                "message": cap(self.message, MESSAGE_LIMIT),
                "traceback": cap(self.traceback, TRACEBACK_LIMIT), "trace": self.trace,
                "location": cap(self.location, MESSAGE_LIMIT)}


def error_name(exc: BaseException) -> str:
    """The exception's type as a person looks it up: ``KeyError``, ``myapp.errors.Oops``."""
    kind = type(exc)
    if kind.__module__ in ("builtins", "__main__"):
        return kind.__qualname__
    return f"{kind.__module__}.{kind.__qualname__}"


def _library_roots() -> tuple[str, ...]:
    """Directories whose code is not a project's: the standard library, site-packages
    (of this environment) and sqlq itself, each with a trailing separator."""
    paths = sysconfig.get_paths()
    roots = {paths[k] for k in ("stdlib", "platstdlib", "purelib", "platlib") if k in paths}
    roots.add(os.path.dirname(os.path.abspath(__file__)))
    return tuple(os.path.join(os.path.realpath(root), "") for root in sorted(roots))


_LIBRARY: tuple[str, ...] | None = None


def raised_at(exc: BaseException) -> str:
    """Where ``exc`` was raised, as Sentry-like tools group errors: the innermost frame of
    its traceback in the project's own code (not the standard library, site-packages or
    sqlq; the innermost frame at all if none is), as ``path:line in function``, the path
    relative to the ``sys.path`` entry it was imported from. ``""`` without a traceback.

    ``KeyError: 'bob'`` and ``KeyError: 'carol'`` raised by one line are one failure."""
    global _LIBRARY
    if _LIBRARY is None:
        _LIBRARY = _library_roots()
    frames = tb.extract_tb(exc.__traceback__) if exc.__traceback__ is not None else []
    if not frames:
        return ""
    own = [f for f in frames if not f.filename.startswith("<")
           and not os.path.realpath(f.filename).startswith(_LIBRARY)]
    frame = (own or frames)[-1]
    return f"{_relative(frame.filename)}:{frame.lineno} in {frame.name}"


def _relative(filename: str) -> str:
    """``filename`` relative to the longest ``sys.path`` entry holding it (as a module
    name is), so that the same code deployed elsewhere has the same location."""
    full = os.path.realpath(filename)
    best = ""
    for entry in sys.path:
        root = os.path.join(os.path.realpath(entry or os.curdir), "")
        if full.startswith(root) and len(root) > len(best):
            best = root
    return full[len(best):] if best else filename


def format_traceback(exc: BaseException, skip: int = 0) -> str:
    """The traceback Python prints for ``exc`` (chained exceptions included), without
    its first ``skip`` frames (the worker's own call into the task), capped."""
    trace = exc.__traceback__
    for _ in range(skip):
        if trace is None or trace.tb_next is None:
            break
        trace = trace.tb_next
    text = "".join(tb.format_exception(type(exc), exc, trace))
    return cap(text.rstrip("\n"), TRACEBACK_LIMIT)


def worker_identity() -> tuple[str, int]:
    """(host, pid) of this process, as an attempt records its worker."""
    return os.uname().nodename, os.getpid()


# -- what a failed run keeps (``Operations.attempts`` reads them) ---------------------------

def traced(attempt: Attempt) -> Attempt:
    """``attempt`` with its run's traceparent, its span marked as failed (in a traced run)."""
    if not (tracing.INSTALLED and tracing.active()) or attempt.trace is not None:
        return attempt
    trace = tracing.failure(attempt.job_id, attempt.error, attempt.message, attempt.traceback)
    return attempt if trace is None else replace(attempt, trace=trace)
