"""The policy for a job while it runs: heartbeat, TTR and grace, decided in one place.

Three drivers run jobs: the synchronous :class:`~sqlq.work.worker.Worker` watching a
child process, its :class:`~sqlq.work.watchdog.Watchdog` thread watching a task in
the main thread, and the :class:`~sqlq.work.aworker.AsyncWorker` on its event loop.
Each does only the waiting and the I/O; what to do and when, and the log lines
that say so, are here:

* :class:`Heartbeat`, one per run: a job with keepalive is touched when
  :data:`HEARTBEAT` of its lease has passed: first measured from the lease it started
  with, then from each touch (goqite's rule), and a touch cut off by a lost connection
  is tried again within :data:`TOUCH_RETRY`; one without keepalive that can be
  stopped (a child process, an ``async def`` task) is stopped
  :func:`~sqlq.work.runner.kill_margin` before its TTR runs out, so that the worker
  still holds it to retry or bury it; one that cannot be stopped (a task in a thread)
  is reported once when its TTR has run out, for it may run again elsewhere. A task's
  ``timeout=`` (an upper bound on the run, whatever the heartbeat keeps alive) asks
  for a stop too when it passes; a run that cannot be stopped is then told through
  ``sqlq.current_job()``.
* :class:`Grace`, one per worker: once a stop is requested the running jobs have
  ``grace`` seconds more, none after a second request (a hurry).

Intervals are measured on ``time.monotonic()``; a job's lease on the clock of its
queue (``queue.engine.clock``), whose milliseconds ``reserved_until`` is written in.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Final

from ..errors import Disconnected, JobCancelled, JobLost
from ..model import Job
from ..steps import snoozed
from .runner import kill_margin

if TYPE_CHECKING:
    pass

log = logging.getLogger("sqlq.worker")

#: A job with keepalive is touched when this fraction of its TTR has passed.
HEARTBEAT = 0.8
#: While a job runs, its driver looks at the stop flag at least this often (seconds).
POLL = 0.25
#: An idle worker looks at its stop flag this often (seconds): one cheap wake-up.
IDLE_CHECK = 1.0
#: Seconds a stopping worker lets its running job finish, unless told otherwise.
DEFAULT_GRACE = 30.0

#: A touch that failed with Disconnected (it waited for the server first: PostgreSQL's
#: reconnect wait; or its connection was cut again as it was made once more) is tried
#: again this soon (seconds), or halfway to the lease's end if that is sooner: the lease
#: stands until then, and the next heartbeat (80% of the TTR later) would come after it.
TOUCH_RETRY = 1.0


def touch_at(job: Job) -> float:
    """Seconds on the queue's clock at which ``job`` should be touched: :data:`HEARTBEAT`
    into its lease (a running job's first touch, a held one's every touch)."""
    if job.reserved_until is None:
        return float("inf")
    return job.reserved_until / 1000 - (1 - HEARTBEAT) * job.ttr


def retry_touch_in(job: Job, now: float) -> float:
    """Seconds until the next try of a touch of ``job`` cut off at ``now`` (seconds on
    the queue's clock): :data:`TOUCH_RETRY`, or half the lease left if that is less."""
    if job.reserved_until is None:
        return TOUCH_RETRY
    left = job.reserved_until / 1000 - now
    return TOUCH_RETRY if left <= 0 else min(TOUCH_RETRY, left / 2)


#: What :meth:`Heartbeat.step` asks of its driver.
TOUCH: Final = "touch"
STOP: Final = "stop"

Clock = Callable[[], int]


def fields(job: Job, name: str, duration: float | None = None, outcome: str = "",
           **more: Any) -> dict[str, Any]:
    """The fields of a worker's log record about ``job`` (JSON logs show them)."""
    record: dict[str, Any] = {"job": job.id, "tube": job.tube, "task": name,
                              "attempt": job.reserves}
    if outcome:
        record["outcome"] = outcome
    if duration is not None:
        record["duration_ms"] = round(duration * 1000, 3)
    record.update(more)
    return record


class Heartbeat:
    """When to touch, stop or report one running job (see the module docstring).

    A driver waits at most :meth:`wait` seconds, then asks :meth:`step` what is due:
    :data:`TOUCH` (call :meth:`touch`, in a thread that may block), :data:`STOP` (kill or
    cancel the run, with :meth:`stop_reason`; if it cannot be stopped, call
    :meth:`unstoppable`), or None.

    Args:
        job: the job, reserved by the worker.
        name: what runs, for the log lines.
        keepalive: touch the job while it runs.
        stoppable: the driver can stop the run (else it only reports it at its TTR).
        clock: the job's queue's clock (``queue.engine.clock``).
        now: ``time.monotonic()`` when the run started.
    """

    __slots__ = ("clock", "deadline", "job", "keepalive", "name", "next_touch", "stoppable",
                 "timeout", "_reported", "_cut_off")

    def __init__(self, job: Job, name: str, keepalive: bool, stoppable: bool, clock: Clock,
                 now: float, timeout: float | None = None) -> None:
        self.job = job
        self.name = name
        self.keepalive = keepalive
        self.stoppable = stoppable
        self.clock = clock
        # The first touch 80% into the lease, not 80% of the TTR after the start: a job
        # started a while after its claim (held in a batch, which may start it with 80%
        # of its TTR left, or on a busy machine) has used part of its lease, and the
        # later touch came as the lease ran out, when another worker could take the job.
        self.next_touch = now + min(HEARTBEAT * job.ttr,
                                    max(0.0, touch_at(job) - clock() / 1000))
        #: The task's execution timeout (seconds), and when it runs out (monotonic).
        self.timeout = timeout
        self.deadline = None if timeout is None else now + timeout
        self._reported = False  # the TTR ran out and the log said so: nothing more to do
        self._cut_off = 0  # touches in a row that failed with Disconnected

    def timed_out(self, now: float) -> bool:
        """Whether the run has outlived its task's ``timeout``."""
        return self.deadline is not None and now >= self.deadline

    def _lease_left(self) -> float:
        """Seconds until the job's reservation runs out (inf: it has no deadline)."""
        until = self.job.reserved_until
        return float("inf") if until is None else (until - self.clock()) / 1000

    def wait(self, now: float) -> float | None:
        """Seconds until :meth:`step` has something to do (0 or less: now); None: never."""
        lease = self._lease_wait(now)
        if self.deadline is None:
            return lease
        left = self.deadline - now
        return left if lease is None else min(left, lease)

    def _lease_wait(self, now: float) -> float | None:
        if self.keepalive:
            return self.next_touch - now
        if self.stoppable:
            return self._lease_left() - kill_margin(self.job.ttr)
        return None if self._reported else self._lease_left()

    def step(self, now: float) -> str | None:
        """What is due at ``now``: :data:`TOUCH`, :data:`STOP` or None. A run that cannot
        be stopped is reported here, once, when its TTR has run out. A run past its
        timeout is :data:`STOP` (once: then the timeout is spent)."""
        if self.timed_out(now):
            self.deadline = None
            return STOP
        if self.keepalive:
            if now < self.next_touch:
                return None
            self.next_touch = now + HEARTBEAT * self.job.ttr
            return TOUCH
        if self.stoppable:
            return STOP if self._lease_left() <= kill_margin(self.job.ttr) else None
        if not self._reported and self._lease_left() <= 0:
            self._reported = True
            log.warning("job %d %s is still running past its TTR of %gs: it may be run again "
                        "elsewhere (give the task keepalive=True)", self.job.id, self.name,
                        self.job.ttr, extra=fields(self.job, self.name))
        return None

    def touch(self) -> None:
        """Touch the job (what :data:`TOUCH` asks) and log how it went; a job whose
        reservation was lost is touched no more."""
        job, name = self.job, self.name
        if snoozed(job):  # given back by the task itself: nothing to keep alive
            self.keepalive = False
            return
        try:
            job.touch()
        except JobCancelled:
            self.keepalive = False
            log.info("job %d %s was cancelled while running", job.id, name,
                     extra=fields(job, name, outcome="cancelled"))
        except JobLost:
            self.keepalive = False
            log.warning("job %d %s lost its reservation while running; it may run again",
                        job.id, name, extra=fields(job, name, outcome="lost"))
        except Disconnected as exc:  # the lease stands: try again before it runs out
            retry = retry_touch_in(job, self.clock() / 1000)
            # step set the next touch a heartbeat after it asked for this one: the
            # retry is counted from that ask instead.
            asked = self.next_touch - HEARTBEAT * job.ttr
            self.next_touch = min(self.next_touch, asked + retry)
            # A touch gives up at the lease's end, so an outage brings a try a second:
            # the first is said, the others only in the debug log.
            self._cut_off += 1
            log.log(logging.WARNING if self._cut_off == 1 else logging.DEBUG,
                    "job %d %s: could not touch it (%s); trying again in %.2gs", job.id,
                    name, exc, retry, extra=fields(job, name))
        else:
            if self._cut_off:
                log.info("job %d %s touched again, after %d tries cut off", job.id, name,
                         self._cut_off, extra=fields(job, name))
                self._cut_off = 0
            log.debug("job %d touched", job.id, extra=fields(job, name))

    def stop_reason(self, how: str) -> str:
        """The failure reason of a run stopped at its TTR or its timeout (``how``: killed,
        cancelled)."""
        if self.timeout is not None and self.deadline is None:
            return f"{how}: still running after its timeout of {self.timeout:g}s"
        return f"{how}: still running when its TTR of {self.job.ttr:g}s ran out"

    def unstoppable(self) -> None:
        """The run could not be stopped: from now on it is reported at its TTR instead."""
        self.stoppable = False


class Grace:
    """How long running jobs may go on once a stop is requested: ``seconds``, or none
    after a second request. One per worker, shared by its drivers.

    Args:
        seconds: the grace period (``--grace``).
    """

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        #: ``time.monotonic()`` at which the grace period ends; None: no stop requested.
        self.until: float | None = None

    def update(self, now: float, stopping: bool, hurry: bool) -> None:
        """The worker's flags as of ``now``: a stop starts the period, a hurry ends it."""
        if hurry:
            self.until = now if self.until is None else min(self.until, now)
        elif stopping and self.until is None:
            self.until = now + self.seconds

    def left(self, now: float) -> float | None:
        """Seconds of grace left (0 or less: none); None if no stop was requested."""
        return None if self.until is None else self.until - now

    def over(self, now: float) -> bool:
        """True once a stop was requested and its grace period has run out."""
        return self.until is not None and now >= self.until


def wake_in(now: float, beat: Heartbeat, grace: Grace, held: float | None) -> float:
    """Seconds a synchronous driver may wait for the run before it looks again: at most
    :data:`POLL` (for the stop flag), less if the heartbeat, the grace period or a held
    job's touch (``held``, see prefetch.Holding.touch_in) is due sooner."""
    waits = [POLL]
    for due in (beat.wait(now), grace.left(now), held):
        if due is not None:
            waits.append(due)
    return max(0.0, min(waits))

