"""What the worker loop asks of a way to run jobs (task functions, shell commands).

The loop in :mod:`sqlq.work.worker` knows nothing about Python functions or child
processes: a :class:`Runner` starts a job and hands back a :class:`Running`, which
the loop polls while it keeps the job alive, watches the TTR and the stop flag.
How the run ended is an :class:`Outcome`; what to do about a failure (release with
a delay, or bury) is the retry policy's decision, taken by the loop.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Protocol

from ..model import Job
from ..tasks.retry import RetryPolicy


def kill_margin(ttr: float) -> float:
    """Seconds before the TTR runs out at which a run that can be killed is stopped.

    Killing a little early, not at the TTR itself, means the worker still holds the
    job afterwards and can retry or bury it with the reason; after the TTR the job
    would already be someone else's. Half the margin goes to SIGTERM, half to SIGKILL.
    """
    return min(2.0, 0.2 * ttr)


@dataclass(frozen=True)
class Outcome:
    """How a run ended.

    ``done``: delete the job (storing ``result`` when it is not None). ``failed``:
    retry under ``policy`` or bury with ``reason``. ``bury``: bury at once with
    ``reason``; running it again cannot help (unknown task, malformed body). A failure
    also says what failed (``error``: an exception's type, an exit status) and how
    (``traceback``: a task's traceback, a command's stderr tail) and where (``location``:
    the project's frame that raised, see :func:`sqlq.attempts.raised_at`), which the worker
    keeps as the job's attempt (sqlq/attempts.py).
    """

    status: Literal["done", "failed", "bury"]
    result: bytes | None = None
    reason: str = ""
    policy: RetryPolicy | None = None
    error: str = ""
    traceback: str = ""
    location: str = ""


def done(result: bytes | None = None) -> Outcome:
    """The job succeeded; ``result`` (JSON bytes) is stored when not None."""
    return Outcome("done", result=result)


#: The outcome of a run that succeeded with nothing to store (the common case).
DONE = done(None)


def failed(reason: str, policy: RetryPolicy, *, error: str = "",
           traceback: str = "", location: str = "") -> Outcome:
    """The job failed and may be retried under ``policy``; ``reason`` is one line."""
    return Outcome("failed", reason=reason, policy=policy, error=error, traceback=traceback,
                   location=location)


def bury(reason: str, *, error: str = "", traceback: str = "") -> Outcome:
    """The job can never succeed as it is: bury it with ``reason``."""
    return Outcome("bury", reason=reason, error=error, traceback=traceback)


def exhausted(job: Job, policy: RetryPolicy) -> Outcome | None:
    """A ``bury`` outcome if ``job``'s earlier runs ended without a verdict too often.

    Every run a worker saw end left a trace, a release (retry, or given back when
    the worker stopped) or a burial (kicked since); the other earlier reservations
    ran out of TTR or died with their worker. More of those than the policy's
    retries, and the job is buried rather than run once more.
    """
    unfinished = job.reserves - 1 - job.releases - job.buries
    if not policy.exhausted(unfinished):
        return None
    return bury(f"gave up after {unfinished} run{'s' if unfinished != 1 else ''} that did not "
                f"finish (TTR {job.ttr:g}s ran out {job.timeouts} times, or the worker died)")


class Running(Protocol):
    """One job being run."""

    #: What runs, for the log line: the task's name or the command.
    name: str
    #: Touch the job at 80% of its TTR while it runs.
    keepalive: bool
    #: Seconds the run may take, whatever the heartbeat keeps alive (a task's ``timeout=``;
    #: None: its TTR bounds it, unless kept alive). Optional: a Running without it has none.
    timeout: float | None
    #: True: ``wait`` runs the job in the calling thread, to the end (a task); the worker
    #: arms its watchdog meanwhile. False: the job runs elsewhere (a child process).
    inline: bool

    def wait(self, timeout: float) -> Outcome | None:
        """Wait up to ``timeout`` seconds; the outcome if the run ended, else None."""

    def kill(self, reason: str) -> Outcome | None:
        """Stop the run now if it can be stopped: its outcome, or None if it cannot."""


class Runner(Protocol):
    """Starts jobs."""

    def start(self, job: Job) -> Running:
        """Start running ``job`` (reserved by the caller) and return at once."""

    def close(self) -> None:
        """Release what the runner holds (threads, processes)."""


@dataclass
class Finished:
    """A run that ended before it started (a body that names no known task)."""

    outcome: Outcome
    name: str = "?"
    keepalive: bool = False
    timeout: float | None = None
    inline: bool = False

    def wait(self, timeout: float) -> Outcome | None:
        """The outcome, at once."""
        return self.outcome

    def kill(self, reason: str) -> Outcome | None:
        """Nothing to stop."""
        return self.outcome
