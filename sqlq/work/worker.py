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

A job that succeeds without a result is deleted by the next claim in the same
transaction (``reserve(delete=job)``): one commit per job. With prefetch (the
default adapts, see :mod:`sqlq.work.prefetch`) a claim takes a batch and deletes
the finished ones of the last (``reserve_many(n, delete=done)``): one commit per
batch. Each job's outcome is handled as it would be one at a time (a result
stored, a retry, a burial: each its own commit at once; a lost lease logged). A
stopping worker runs the rest of its batch if it should take no more than
:data:`FINISH_ON_STOP` (and the grace period), and otherwise releases it at once.
Retry decisions belong to the job's :class:`~sqlq.work.retry.RetryPolicy`, not to this loop.
"""

from __future__ import annotations

import logging
import os
import signal
import time
from collections.abc import Sequence
from types import FrameType
from typing import Any

from ..attempts import BURIED, LOST, RETRIED, Attempt, worker_identity
from ..durations import now_ms
from ..errors import Disconnected, JobLost
from ..model import Job, check_tubes
from ..queue import Queue
from . import runner
from .prefetch import WAITING, BatchSize, Done, Holding, keep, started_fresh
from .recorder import Recorder
from .retry import RetryPolicy
from .watchdog import HEARTBEAT, POLL, Watchdog

log = logging.getLogger("sqlq.worker")

#: An idle worker looks at its stop flag this often (seconds): one cheap wake-up.
IDLE_CHECK = 1.0
#: Seconds a stopping worker lets its running job finish, unless told otherwise.
DEFAULT_GRACE = 30.0
#: A stopping worker still runs the jobs of its batch if they should take no longer
#: than this (and than the grace period); otherwise it releases them at once.
FINISH_ON_STOP = 1.0


class Worker:
    """Reserves jobs from ``tubes`` and runs each with ``runner`` until told to stop.

    Args:
        queue: the queue to work on (this worker's own: it owns the reservations).
        runner: starts jobs (:class:`~sqlq.work.tasks.TaskRunner`,
            :class:`~sqlq.work.shell.ShellRunner`).
        tubes: the tubes to watch.
        burst: return as soon as no job is ready, instead of waiting for more.
        grace: seconds a running job may go on after a stop is requested.
        prefetch: jobs claimed per commit; None adapts to how long jobs take (see
            :mod:`sqlq.work.prefetch`); 1 claims one at a time.
    """

    def __init__(self, queue: Queue, runner: runner.Runner, tubes: Sequence[str], *,
                 burst: bool = False, grace: float = DEFAULT_GRACE,
                 prefetch: int | None = None) -> None:
        self.queue = queue
        self.runner = runner
        self.tubes = check_tubes(list(tubes))
        self.burst = burst
        self.grace = grace
        self.stopping = False   # set by a signal: reserve no more
        self.hurry = False      # set by a second signal: do not wait for the grace period
        self.abandoned = False  # a task thread was left running past the grace period
        self.processed = 0
        self.batch = BatchSize(prefetch)
        #: Jobs claimed and not started, and jobs done and not yet deleted.
        self.holding = Holding()
        self._finish_held: bool | None = None  # stopping: run the batch held, or release it
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
        try:
            while not self.abandoned:
                self.durations.flush_if_due()
                if self._orphaned():
                    self.request_stop()
                job = self._next_job()
                if job is None:
                    if self.burst or self.stopping:
                        break
                    continue
                done = self._run(job)
                self.processed += 1
                if done is not None:
                    self.holding.finished(done)
        finally:
            self._give_back_waiting("the worker is stopping")
            self._ack()
            self.close()
        return self.processed

    def _next_job(self) -> Job | None:
        """The next job to run: the next of the batch held, else one from a new claim."""
        holding = self.holding
        if holding.waiting:
            if self.stopping and not self._finish_batch():
                self._give_back_waiting("the worker is stopping")
            else:
                holding.touch_due()
                if holding.ack_due(time.monotonic()):
                    self._ack()
                job = holding.next_job()
                if job is not None and (started_fresh(job) or keep(job, WAITING)):
                    return job
                if job is not None:
                    return self._next_job()  # lost while it waited: it runs elsewhere
        if self.stopping:
            return None
        size = self.batch.next()
        jobs: list[Job] = []
        acks = holding.take_done()
        if acks:  # finish them and claim the next batch in one commit
            jobs = self._claim(size, 0, acks)
        if not jobs and not self.stopping:
            jobs = self._claim(size, 0 if self.burst else IDLE_CHECK, [])
        for job in jobs:
            self.durations.reserved(job)
        if not jobs:
            return None
        holding.add(jobs[1:])
        return jobs[0]

    def _claim(self, size: int, timeout: float, acks: list[Done]) -> list[Job]:
        """Delete ``acks`` and claim up to ``size`` jobs, in one commit.

        One job at a time goes through ``reserve``, exactly as without prefetch.
        If an ack's lease was lost, nothing is claimed (the caller claims again).
        """
        delete = [done.job for done in acks]
        try:
            if size == 1 and len(delete) <= 1:
                job = self.queue.reserve(self.tubes, timeout=timeout,
                                         delete=delete[0] if delete else None)
                jobs = [] if job is None else [job]
            else:
                jobs = self.queue.reserve_many(size, self.tubes, timeout, delete=delete or None)
        except JobLost as exc:
            self._acked(acks, exc.job_ids or [job.id for job in delete])
            return []
        except Disconnected as exc:
            if not acks:
                # A claim that may not wait (timeout 0, --burst) raises it; one that
                # may waits through the outage inside reserve. The loop claims again.
                log.warning("%s; claiming again", exc)
                return []
            # The database went away with the acknowledgements in flight: make each
            # again (Queue.delete finds out whether the first one committed).
            log.warning("%s; acknowledging %d finished job(s) again", exc, len(acks))
            self._ack_each(acks)
            return []
        self._acked(acks)
        return jobs

    def _ack_each(self, acks: list[Done]) -> None:
        """Acknowledge each job again after a commit of them all was cut off. A job
        gone by then is logged as lost: that commit may have deleted it, or another
        worker may have (no one can tell), and "done" must never be said falsely."""
        lost = []
        for done in acks:
            try:
                done.job.delete()
            except JobLost:
                lost.append(done.job.id)
        self._acked(acks, lost)

    def _ack(self) -> None:
        """Delete the finished jobs held for the next claim, now, in one commit."""
        acks = self.holding.take_done()
        if not acks:
            return
        try:
            if len(acks) == 1:
                acks[0].job.delete()
            else:
                self.queue.delete_many([done.job for done in acks])
        except JobLost as exc:
            self._acked(acks, exc.job_ids or [done.job.id for done in acks])
            return
        except Disconnected as exc:
            log.warning("%s; acknowledging %d finished job(s) again", exc, len(acks))
            self._ack_each(acks)
            return
        self._acked(acks)

    def _acked(self, acks: list[Done], lost: Sequence[int] = ()) -> None:
        """Log each acknowledged job: done, or lost (its lease had gone)."""
        if not lost and not log.isEnabledFor(logging.INFO):
            return  # nothing to say: once per batch, not once per job
        for done in acks:
            if done.job.id in lost:
                self._lost(done.job, done.name, done.duration)
            else:
                self._log_done(done)

    def _finish_batch(self) -> bool:
        """Stopping: run the batch held if it should take a moment, else give it back."""
        if self._finish_held is None:
            expected = self.batch.expected(len(self.holding.waiting))
            self._finish_held = expected is not None and \
                expected <= min(FINISH_ON_STOP, self.grace)
        return self._finish_held and not self.hurry

    def _give_back_waiting(self, why: str) -> None:
        """Release the jobs of the batch that have not started (ready at once)."""
        for job in self.holding.take_waiting():
            self._give_back(job, why)

    def _abandon(self, job: Job, why: str) -> None:
        """The grace period ran out (the watchdog's call, before the process exits): give
        the running job and the batch back, delete the finished ones."""
        self._give_back(job, why)
        self._give_back_waiting(why)
        self._ack()

    def _run(self, job: Job) -> Done | None:
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
        self.batch.observe(duration)
        if outcome is None:
            return None  # given back to the queue: the grace period ran out
        return self._finish(job, running.name, outcome, duration)

    def _ensure_watchdog(self) -> Watchdog:
        if self._watchdog is None:
            self._watchdog = Watchdog(self.grace, lambda: (self.stopping, self.hurry),
                                      self._abandon, self._signal_fd, self.holding)
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
            held = self.holding.touch_in()
            if held is not None:
                waits.append(held)
            outcome = running.wait(max(0.0, min(waits)))
            if outcome is not None:
                return outcome
            self.holding.touch_due()
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
        except Disconnected as exc:  # the lease stands; the next heartbeat tries again
            log.warning("job %d %s: could not touch it (%s)", job.id, name, exc,
                        extra=self._fields(job, name))
            return True
        log.debug("job %d touched", job.id, extra=self._fields(job, name))
        return True

    def _stop_running(self, job: Job, running: runner.Running) -> None:
        if running.kill("the worker stopped") is None:
            self.abandoned = True  # a thread cannot be killed; the process will exit
        self._give_back(job, "the grace period ran out", running.name)
        self._give_back_waiting("the grace period ran out")

    def _give_back(self, job: Job, why: str, name: str = "") -> None:
        try:
            job.release()
        except JobLost:
            return
        log.info("job %d released: %s", job.id, why,
                 extra=self._fields(job, name, outcome="released", reason=why))

    def _finish(self, job: Job, name: str, outcome: runner.Outcome,
                duration: float) -> Done | None:
        attempt = job.reserves
        self.durations.ran(job, duration)
        try:
            if outcome.status == "done":
                if outcome.result is None:
                    return Done(job, name, duration, time.monotonic())
                job.complete(outcome.result)
                self._log_done(Done(job, name, duration, time.monotonic()))
            elif outcome.status == "failed" and self._retry(outcome.policy, attempt):
                assert outcome.policy is not None
                delay = outcome.policy.delay_for(attempt)
                self.queue.engine.end_attempt(job, _attempt(job, outcome, duration, RETRIED), delay)
                log.warning("job %d %s failed in %s (attempt %d), retry in %.1fs: %s", job.id,
                            name, _ms(duration), attempt, delay, outcome.reason,
                            extra=self._fields(job, name, duration, "retry", delay=round(delay, 3),
                                               reason=outcome.reason,
                                               **_traceback(outcome)))
            else:
                self.queue.engine.end_attempt(job, _attempt(job, outcome, duration, BURIED), None)
                log.error("job %d %s buried after %d attempt%s: %s", job.id, name, attempt,
                          "" if attempt == 1 else "s", outcome.reason,
                          extra=self._fields(job, name, duration, "buried",
                                             reason=outcome.reason, **_traceback(outcome)))
        except JobLost:
            if outcome.status != "done":
                # The failure is still worth keeping, beside the job's next run.
                self.queue.engine.keep_attempt(_attempt(job, outcome, duration, LOST))
            self._lost(job, name, duration, outcome)
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

    def _log_done(self, done: Done) -> None:
        if not log.isEnabledFor(logging.INFO):
            return  # a no-op job costs less than building this line's fields
        log.info("job %d %s done in %s (tube %s, attempt %d)", done.job.id, done.name,
                 _ms(done.duration), done.job.tube, done.job.reserves,
                 extra=self._fields(done.job, done.name, done.duration, "done"))

    def _lost(self, job: Job, name: str, duration: float,
              outcome: runner.Outcome | None = None) -> None:
        failed = outcome is not None and outcome.status != "done"
        log.warning("job %d %s finished in %s after its reservation was lost (TTR ran out): "
                    "%s, it runs again", job.id, name, _ms(duration),
                    f"its failure kept ({outcome.reason})" if failed and outcome is not None
                    else "nothing recorded",
                    extra=self._fields(job, name, duration, "lost",
                                       **(_traceback(outcome) if outcome else {})))


def _attempt(job: Job, outcome: runner.Outcome, duration: float, what: str) -> Attempt:
    """The attempt to keep of a failed run of ``job`` that ended just now."""
    host, pid = worker_identity()
    return Attempt(job.id, job.reserves, now_ms() - round(duration * 1000), duration, host,
                   pid, what, outcome.error, outcome.reason, outcome.traceback)


def _traceback(outcome: runner.Outcome) -> dict[str, str]:
    """The log record's ``traceback`` field (text and JSON logs show it), if any."""
    return {"traceback": outcome.traceback} if outcome.traceback else {}


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:.1f}ms" if seconds < 10 else f"{seconds:.1f}s"
