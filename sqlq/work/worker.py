"""The worker loop: reserve, run, then delete, release with a delay, or bury.

One worker process runs one job at a time (``--processes N`` runs N of them under
:mod:`sqlq.work.supervisor`). A task runs in the main thread, watched by the
:class:`~sqlq.work.watchdog.Watchdog` thread; a shell command runs in a child process,
watched by the main thread. Either way three promises hold:

* the heartbeat: a job that opted in is touched at 80% of its TTR (goqite's rule),
  so a long job is never handed to a second worker while this one lives;
* the TTR: a shell command still running just before its TTR runs out is killed, so
  the worker can still retry or bury it itself;
* stopping: SIGTERM and SIGINT handlers only set flags (huey's rule). The loop
  stops reserving, lets the running job finish within ``grace`` seconds, gives it
  back to the queue if it does not, and returns (a task that cannot be stopped
  makes the process exit). A second signal skips the grace.

A job that succeeds without a result is deleted by the next ``reserve`` in the same
transaction as the next claim (``reserve(delete=job)``): one commit per job.
Retry decisions belong to the job's :class:`~sqlq.work.retry.RetryPolicy`, not to this loop.
"""

from __future__ import annotations

import logging
import os
import signal
import time
from collections.abc import Sequence
from dataclasses import dataclass
from types import FrameType
from typing import Any

from ..durations import now_ms
from ..errors import JobLost
from ..model import Job, check_tubes
from ..queue import Queue
from . import runner
from .recorder import Recorder
from .retry import RetryPolicy
from .watchdog import HEARTBEAT, POLL, Watchdog

log = logging.getLogger("sqlq.worker")

#: An idle worker looks at its stop flag this often (seconds): one cheap wake-up.
IDLE_CHECK = 1.0
#: Seconds a stopping worker lets its running job finish, unless told otherwise.
DEFAULT_GRACE = 30.0


@dataclass
class _Done:
    """A job that succeeded and is deleted by the next reserve (the one-commit fast path)."""

    job: Job
    name: str
    duration: float


class Worker:
    """Reserves jobs from ``tubes`` and runs each with ``runner`` until told to stop.

    Args:
        queue: the queue to work on (this worker's own: it owns the reservations).
        runner: starts jobs (:class:`~sqlq.work.tasks.TaskRunner`,
            :class:`~sqlq.work.shell.ShellRunner`).
        tubes: the tubes to watch.
        burst: return as soon as no job is ready, instead of waiting for more.
        grace: seconds a running job may go on after a stop is requested.
    """

    def __init__(self, queue: Queue, runner: runner.Runner, tubes: Sequence[str], *,
                 burst: bool = False, grace: float = DEFAULT_GRACE) -> None:
        self.queue = queue
        self.runner = runner
        self.tubes = check_tubes(list(tubes))
        self.burst = burst
        self.grace = grace
        self.stopping = False   # set by a signal: reserve no more
        self.hurry = False      # set by a second signal: do not wait for the grace period
        self.abandoned = False  # a task thread was left running past the grace period
        self.processed = 0
        supervisor = os.environ.get("SQLQ_SUPERVISOR_PID", "")
        self._supervisor = int(supervisor) if supervisor.isdigit() else None
        self._signal_fd: int | None = None
        self._watchdog: Watchdog | None = None
        #: Waits and runs for the histograms of /metrics (added to the database every 10 s).
        self.durations = Recorder(queue)

    # -- stopping ----------------------------------------------------------------------------

    def request_stop(self, hurry: bool = False) -> None:
        """Stop after the running job (or at once with ``hurry``); safe in a signal handler."""
        if self.stopping or hurry:
            self.hurry = True
        self.stopping = True

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        self.request_stop()

    def _orphaned(self) -> bool:
        """True if this worker's supervisor is gone (a SIGKILLed supervisor cannot stop us)."""
        return self._supervisor is not None and os.getppid() != self._supervisor

    def install_signal_handlers(self) -> None:
        """SIGTERM and SIGINT request a stop (a second one hurries it); main thread only.

        The signal wake-up fd tells the watchdog at once, even while the main thread
        is busy in a task's C code and the Python handler has not run yet.
        """
        read, write = os.pipe()
        os.set_blocking(read, False)
        os.set_blocking(write, False)
        signal.set_wakeup_fd(write, warn_on_full_buffer=False)
        self._signal_fd = read
        signal.signal(signal.SIGTERM, self._on_signal)
        signal.signal(signal.SIGINT, self._on_signal)

    def close(self) -> None:
        """Record the last waits and runs; stop the watchdog thread."""
        self.durations.flush()
        if self._watchdog is not None:
            self._watchdog.close()
            self._watchdog = None

    # -- the loop ----------------------------------------------------------------------------

    def run(self) -> int:
        """Work until stopped (or, in burst mode, until no job is ready); return jobs run."""
        pending: _Done | None = None
        try:
            while True:
                job = None
                self.durations.flush_if_due()
                if self._orphaned():
                    self.request_stop()
                if pending is not None:
                    job, pending = self._delete_and_reserve(pending), None
                if job is None:
                    if self.stopping:
                        break
                    job = self.queue.reserve(self.tubes, timeout=0 if self.burst else IDLE_CHECK)
                if job is None:
                    if self.burst or self.stopping:
                        break
                    continue
                self.durations.reserved(job)
                if self.stopping:
                    self._give_back(job, "the worker is stopping")
                    break
                pending = self._run(job)
                self.processed += 1
                if self.abandoned:
                    break
        finally:
            if pending is not None:
                self._delete(pending)
            self.close()
        return self.processed

    def _delete_and_reserve(self, done: _Done) -> Job | None:
        if self.stopping:
            self._delete(done)
            return None
        try:
            job = self.queue.reserve(self.tubes, timeout=0, delete=done.job)
        except JobLost:
            self._lost(done.job, done.name, done.duration)
            return None
        self._log_done(done)
        return job

    def _delete(self, done: _Done) -> None:
        try:
            done.job.delete()
        except JobLost:
            self._lost(done.job, done.name, done.duration)
        else:
            self._log_done(done)

    def _run(self, job: Job) -> _Done | None:
        started = time.monotonic()
        running = self.runner.start(job)
        if running.inline:
            watchdog = self._ensure_watchdog()
            watchdog.arm(job, running.name, running.keepalive)
            try:
                outcome: runner.Outcome | None = running.wait(float("inf"))
            finally:
                watchdog.disarm()
        else:
            outcome = self._watch(job, running)
        duration = time.monotonic() - started
        if outcome is None:
            return None  # given back to the queue: the grace period ran out
        return self._finish(job, running.name, outcome, duration)

    def _ensure_watchdog(self) -> Watchdog:
        if self._watchdog is None:
            self._watchdog = Watchdog(self.grace, lambda: (self.stopping, self.hurry),
                                      self._give_back, self._signal_fd)
        return self._watchdog

    def _until_kill(self, job: Job) -> float:
        """Seconds until a killable run of ``job`` must be stopped (see runner.kill_margin)."""
        if job.reserved_until is None:
            return float("inf")
        return (job.reserved_until - now_ms()) / 1000 - runner.kill_margin(job.ttr)

    def _watch(self, job: Job, running: runner.Running) -> runner.Outcome | None:
        """Wait for a run elsewhere to end, heartbeating, enforcing the TTR and the grace."""
        keepalive = running.keepalive
        next_touch = time.monotonic() + HEARTBEAT * job.ttr
        kill_tried = False
        grace_until: float | None = None
        while True:
            now = time.monotonic()
            if self.stopping and grace_until is None:
                grace_until = now + self.grace
            if self.hurry:
                grace_until = now
            waits = [POLL]
            if keepalive:
                waits.append(next_touch - now)
            elif not kill_tried:
                waits.append(self._until_kill(job))
            if grace_until is not None:
                waits.append(grace_until - now)
            outcome = running.wait(max(0.0, min(waits)))
            if outcome is not None:
                return outcome
            now = time.monotonic()
            if grace_until is not None and now >= grace_until:
                self._stop_running(job, running)
                return None
            if keepalive and now >= next_touch:
                keepalive = self._touch(job, running.name)
                next_touch = now + HEARTBEAT * job.ttr
            elif not keepalive and not kill_tried and self._until_kill(job) <= 0:
                kill_tried = True
                outcome = running.kill(f"killed: still running when its TTR of {job.ttr:g}s "
                                       "ran out")
                if outcome is not None:
                    return outcome
                log.warning("job %d %s is still running past its TTR of %gs: it may be run "
                            "again elsewhere (give the task keepalive=True)", job.id,
                            running.name, job.ttr, extra=self._fields(job, running.name))

    def _touch(self, job: Job, name: str) -> bool:
        try:
            job.touch()
        except JobLost:
            log.warning("job %d %s lost its reservation while running; it may run again",
                        job.id, name, extra=self._fields(job, name, outcome="lost"))
            return False
        log.debug("job %d touched", job.id, extra=self._fields(job, name))
        return True

    def _stop_running(self, job: Job, running: runner.Running) -> None:
        if running.kill("the worker stopped") is None:
            self.abandoned = True  # a thread cannot be killed; the process will exit
        self._give_back(job, "the grace period ran out", running.name)

    def _give_back(self, job: Job, why: str, name: str = "") -> None:
        try:
            job.release()
        except JobLost:
            return
        log.info("job %d released: %s", job.id, why,
                 extra=self._fields(job, name, outcome="released", reason=why))

    def _finish(self, job: Job, name: str, outcome: runner.Outcome,
                duration: float) -> _Done | None:
        attempt = job.reserves
        self.durations.ran(job, duration)
        try:
            if outcome.status == "done":
                if outcome.result is None:
                    return _Done(job, name, duration)
                job.complete(outcome.result)
                self._log_done(_Done(job, name, duration))
            elif outcome.status == "failed" and self._retry(outcome.policy, attempt):
                assert outcome.policy is not None
                delay = outcome.policy.delay_for(attempt)
                job.release(delay=delay)
                log.warning("job %d %s failed in %s (attempt %d), retry in %.1fs: %s", job.id,
                            name, _ms(duration), attempt, delay, outcome.reason,
                            extra=self._fields(job, name, duration, "retry", delay=round(delay, 3),
                                               reason=outcome.reason))
            else:
                job.bury(reason=outcome.reason)
                log.error("job %d %s buried after %d attempt%s: %s", job.id, name, attempt,
                          "" if attempt == 1 else "s", outcome.reason,
                          extra=self._fields(job, name, duration, "buried",
                                             reason=outcome.reason))
        except JobLost:
            self._lost(job, name, duration)
        return None

    @staticmethod
    def _retry(policy: RetryPolicy | None, attempt: int) -> bool:
        return policy is not None and policy.should_retry(attempt)

    # -- one log line per outcome ------------------------------------------------------------

    def _fields(self, job: Job, name: str, duration: float | None = None, outcome: str = "",
                **more: Any) -> dict[str, Any]:
        fields: dict[str, Any] = {"job": job.id, "tube": job.tube, "task": name,
                                  "attempt": job.reserves}
        if outcome:
            fields["outcome"] = outcome
        if duration is not None:
            fields["duration_ms"] = round(duration * 1000, 3)
        fields.update(more)
        return fields

    def _log_done(self, done: _Done) -> None:
        log.info("job %d %s done in %s (tube %s, attempt %d)", done.job.id, done.name,
                 _ms(done.duration), done.job.tube, done.job.reserves,
                 extra=self._fields(done.job, done.name, done.duration, "done"))

    def _lost(self, job: Job, name: str, duration: float) -> None:
        log.warning("job %d %s finished in %s after its reservation was lost (TTR ran out): "
                    "nothing recorded, it runs again", job.id, name, _ms(duration),
                    extra=self._fields(job, name, duration, "lost"))


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:.1f}ms" if seconds < 10 else f"{seconds:.1f}s"
