"""The worker loop: reserve, run, then delete, release with a delay, or bury.

One worker process runs one job at a time (``--processes N`` runs N of them under
:mod:`sqlq.work.supervisor`). A task runs in the main thread, watched by the
:class:`~sqlq.work.watchdog.Watchdog` thread; a shell command runs in a child process,
watched by the main thread. Either way three promises hold:

* the heartbeat: a job that opted in is touched at 80% of its TTR (goqite's rule),
  so a long job is never handed to a second worker while this one lives;
* the TTR: a shell command still running just before its TTR runs out is killed, so
  the worker can still retry or bury it itself;
* cancel: a job cancelled while it runs (``Queue.cancel``) is stopped within about a
  second (:mod:`sqlq.work.cancel`): a command is killed, a task told at its next
  ``sqlq.current_job()``; nothing is written for it, the job being gone;
* stopping: SIGTERM and SIGINT handlers only set flags (huey's rule). The loop
  stops reserving, lets the running job finish within ``grace`` seconds, gives it
  back to the queue if it does not, and returns (a task that cannot be stopped
  makes the process exit). A second signal skips the grace.

What is due when (a touch, a kill, a warning, the end of the grace) is
:mod:`sqlq.work.heartbeat`'s decision, for this loop, its watchdog and the
``--concurrency`` worker alike; claims, acknowledgements, outcomes and their log
lines are its :class:`~sqlq.work.handling.JobHandling`'s.

A job that succeeds without a result is deleted by the next claim in the same
transaction (``reserve(delete=job)``): one commit per job. With prefetch (the
default adapts, see :mod:`sqlq.work.prefetch`) a claim takes a batch and deletes
the finished ones of the last (``reserve_many(n, delete=done)``): one commit per
batch. Each job's outcome is handled as it would be one at a time (a result
stored, a retry, a burial: each its own commit at once; a lost lease logged). A
stopping worker runs the rest of its batch if it should take no more than
:data:`FINISH_ON_STOP` (and the grace period), and otherwise releases it at once.
Retry decisions belong to the job's :class:`~sqlq.tasks.retry.RetryPolicy`, not to this loop.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Sequence
from types import FrameType

from .. import control
from ..model import Job
from ..queue import Queue
from . import runner
from .cancel import CancelCheck, log_cancelled
from .handling import JobHandling
from .heartbeat import DEFAULT_GRACE as DEFAULT_GRACE  # command.py's import
from .heartbeat import IDLE_CHECK, STOP, TOUCH, Grace, Heartbeat, wake_in
from .prefetch import WAITING, Done, keep
from .watchdog import Watchdog

#: A stopping worker still runs the jobs of its batch if they should take no longer
#: than this (and than the grace period); otherwise it releases them at once.
FINISH_ON_STOP = 1.0


class Worker:
    """Reserves jobs from ``tubes`` and runs each with ``runner`` until told to stop.

    Args:
        queue: the queue to work on (this worker's own: it owns the reservations).
        runner: starts jobs (:class:`~sqlq.work.taskrun.TaskRunner`,
            :class:`~sqlq.work.shell.ShellRunner`).
        tubes: the tubes to watch.
        burst: return as soon as no job is ready, instead of waiting for more.
        grace: seconds a running job may go on after a stop is requested.
        prefetch: jobs claimed per commit; None adapts to how long jobs take (see
            :mod:`sqlq.work.prefetch`); 1 claims one at a time.
    """

    #: Claims, acknowledgements and outcomes (a subclass may watch them: tests/chaos_agent.py).
    handling_class: type[JobHandling] = JobHandling

    def __init__(self, queue: Queue, runner: runner.Runner, tubes: Sequence[str], *,
                 burst: bool = False, grace: float = DEFAULT_GRACE,
                 prefetch: int | None = None) -> None:
        self.handling = handling = self.handling_class(queue, tubes, prefetch)
        self.queue = queue
        self.runner = runner
        self.tubes = handling.tubes
        self.burst = burst
        self.grace = grace
        self.stopping = False   # set by a signal: reserve no more
        self.hurry = False      # set by a second signal: do not wait for the grace period
        self.abandoned = False  # a task thread was left running past the grace period
        self.processed = 0
        self.batch = handling.batch
        #: Jobs claimed and not started, and jobs done and not yet deleted.
        self.holding = handling.holding
        #: Waits and runs for the histograms of /metrics (added to the database every 10 s).
        self.durations = handling.durations
        self._grace = Grace(grace)
        self._finish_held: bool | None = None  # stopping: run the batch held, or release it
        self._signal_fd: int | None = None
        self._watchdog: Watchdog | None = None
        #: Once a second while a job runs: was it (or one of the batch) cancelled?
        self._cancels = CancelCheck(queue)

    # -- stopping ----------------------------------------------------------------------------

    def request_stop(self, hurry: bool = False) -> None:
        """Stop after the running job (or at once with ``hurry``); safe in a signal handler."""
        if self.stopping or hurry:
            self.hurry = True
        self.stopping = True

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        self.request_stop()

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
        self.handling.close()
        if self._watchdog is not None:
            self._watchdog.close()
            self._watchdog = None

    # -- the loop ----------------------------------------------------------------------------

    def run(self) -> int:
        """Work until stopped (or, in burst mode, until no job is ready); return jobs run."""
        handling = self.handling
        try:
            while not self.abandoned:
                handling.tick()
                if handling.orphaned():
                    self.request_stop()
                job = self._next_job()
                if job is None:
                    if self.burst or self.stopping:
                        break
                    continue
                handling.presence.started(job.id)
                done = self._run(job)
                handling.presence.ended(job.id)
                self.processed += 1
                if done is not None:
                    self.holding.finished(done)
        finally:
            handling.give_back_waiting("the worker is stopping")
            handling.ack()
            self.close()
        return self.processed

    def _next_job(self) -> Job | None:
        """The next job to run: the next of the batch held, else one from a new claim."""
        holding, handling = self.holding, self.handling
        if holding.waiting:
            if self.stopping and not self._finish_batch():
                handling.give_back_waiting("the worker is stopping")
            else:
                handling.tend()
                job = holding.next_job()
                if job is not None and (holding.started_fresh(job) or keep(job, WAITING)):
                    return job
                if job is not None:
                    return self._next_job()  # lost while it waited: it runs elsewhere
        if self.stopping:
            return None
        size = self.batch.next()
        jobs: list[Job] = []
        acks = holding.take_done()
        if acks:  # finish them and claim the next batch in one commit
            jobs = handling.claim(size, 0, acks)
        if not jobs and not self.stopping:
            jobs = handling.claim(size, 0 if self.burst else IDLE_CHECK, [])
        if not jobs:
            return None
        handling.reserved(jobs)
        holding.add(jobs[1:])
        return jobs[0]

    def _finish_batch(self) -> bool:
        """Stopping: run the batch held if it should take a moment, else give it back."""
        if self._finish_held is None:
            expected = self.batch.expected(len(self.holding.waiting))
            self._finish_held = expected is not None and \
                expected <= min(FINISH_ON_STOP, self.grace)
        return self._finish_held and not self.hurry

    def _abandon(self, job: Job, why: str) -> None:
        """The grace period ran out (the watchdog's call, before the process exits): give
        the running job and the batch back, delete the finished ones."""
        handling = self.handling
        handling.give_back(job, why)
        handling.give_back_waiting(why)
        handling.ack()

    def _run(self, job: Job) -> Done | None:
        if control.was_cancelled(job.id):  # while it waited in the batch
            control.forget(job.id)
            log_cancelled(job, "", "dropped before it started")
            return None
        with self.queue.operations.processing(job):  # its span, when tracing is on
            return self._run_job(job)

    def _run_job(self, job: Job) -> Done | None:
        started = time.monotonic()
        running = self.runner.start(job)
        if running.inline:
            watchdog = self._ensure_watchdog()
            watchdog.arm(job, running.name, running.keepalive, _timeout(running))
            try:
                outcome: runner.Outcome | None = running.wait(float("inf"))
            finally:
                watchdog.disarm()
        else:
            outcome = self._watch(job, running)
        duration = time.monotonic() - started
        self.batch.observe(duration)
        if control.was_cancelled(job.id):
            control.forget(job.id)  # the job is gone: nothing to write
            log_cancelled(job, running.name, f"its run ended after {duration:.1f}s")
            return None
        control.forget(job.id)
        if outcome is None:
            return None  # given back to the queue: the grace period ran out
        return self.handling.finish(job, running.name, outcome, duration)

    def _ensure_watchdog(self) -> Watchdog:
        if self._watchdog is None:
            self._watchdog = Watchdog(self._grace, lambda: (self.stopping, self.hurry),
                                      self._abandon, self._signal_fd, self.holding,
                                      self.handling.clock, self._cancels,
                                      self.handling.presence.beat_if_due)
        return self._watchdog

    def _watch(self, job: Job, running: runner.Running) -> runner.Outcome | None:
        """Wait for a run elsewhere to end, heartbeating, enforcing the TTR and the grace."""
        grace, holding = self._grace, self.holding
        beat = Heartbeat(job, running.name, running.keepalive, True, self.handling.clock,
                         time.monotonic(), _timeout(running))
        cancels, presence = self._cancels, self.handling.presence
        while True:
            now = time.monotonic()
            grace.update(now, self.stopping, self.hurry)
            outcome = running.wait(wake_in(now, beat, grace, holding.touch_in()))
            if outcome is not None:
                return outcome
            holding.touch_due()
            presence.beat_if_due()  # the row says busy, its heartbeat fresh (presence.py)
            now = time.monotonic()
            if job in cancels.check(now, [job, *holding.waiting]):
                return running.kill("cancelled")  # its process group; _run drops the outcome
            if grace.over(now):
                self._stop_running(job, running)
                return None
            step = beat.step(now)
            if step == TOUCH:
                beat.touch()
            elif step == STOP:
                outcome = running.kill(beat.stop_reason("killed"))
                if outcome is not None:
                    return outcome
                beat.unstoppable()

    def _stop_running(self, job: Job, running: runner.Running) -> None:
        if running.kill("the worker stopped") is None:
            self.abandoned = True  # a thread cannot be killed; the process will exit
        self.handling.give_back(job, "the grace period ran out", running.name)
        self.handling.give_back_waiting("the grace period ran out")


def _timeout(running: runner.Running) -> float | None:
    """A run's execution timeout; None for a Running made before runners had one."""
    return getattr(running, "timeout", None)
