"""The worker loop for ``async def`` tasks: ``--concurrency`` jobs at once on one event loop.

``sqlq work`` runs this loop instead of :class:`~sqlq.work.worker.Worker` when an
imported task is a coroutine function or ``--concurrency`` is above 1. It keeps
the synchronous worker's promises, on the loop instead of a watchdog thread:

* the heartbeat: a task with ``keepalive`` is touched at 80% of its TTR;
* the TTR: a task without it still running just before its TTR runs out (the
  runner's kill margin) is cancelled, which is a failure with the reason
  "cancelled: still running when its TTR of ...s ran out", retried under the
  task's policy and then buried with that reason;
* stopping: SIGTERM or SIGINT stops reserving at once (a cancelled ``reserve``
  leaves no lease), lets running jobs finish within ``grace`` seconds, then
  cancels them and releases their jobs. A second signal skips the grace.

* prefetch (``--prefetch``, as the synchronous worker's, see
  :mod:`sqlq.work.prefetch`): a claim takes, in one commit, enough jobs to fill the
  free slots plus the batch the policy allows less one (the synchronous worker
  holds its running job and the rest of its batch; this one holds its running
  jobs and the same rest), and deletes the jobs finished since the last claim
  (``reserve_many(n, delete=done)``); finished jobs no claim picks up within
  :data:`~sqlq.work.prefetch.ACK_WAIT` are deleted together (``delete_many``).
  Jobs waiting in the batch, and finished ones not yet deleted, are touched 80%
  into their TTR; a job starts with at least 80% of its TTR ahead (touched first if
  it waited longer), and one whose lease lapsed while it waited is not run.
  ``--prefetch 1`` claims just enough to fill the free slots.

What happens to a finished job (delete, complete, retry, bury) and every log
line are the synchronous Worker's too: both hold a
:class:`~sqlq.work.handling.JobHandling` (its calls run in the AsyncQueue's thread),
and both follow :mod:`sqlq.work.heartbeat` for the heartbeat, the TTR and the grace.
A stopping worker releases the jobs waiting in its batch at once (they have not
started), lets the running ones finish within the grace period, then deletes the
finished ones.

A plain function among the tasks runs in a thread; it can be neither cancelled
at its TTR nor stopped (a warning says so), as in the synchronous worker. A task
that blocks the loop (CPU work without ``await``) delays the other jobs and its own
cancellation: run such work in a thread.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import signal
import time
from collections.abc import Awaitable, Sequence
from typing import Any, TypeVar

from .. import control
from ..asynchandles import AsyncJob
from ..asyncq import AsyncQueue
from ..attempts import TIMED_OUT
from ..errors import Disconnected
from ..model import Job
from ..queue import Queue
from ..steps import snoozed
from ..verbs import WAKES
from . import runner
from .cancel import CancelCheck, log_cancelled
from .handling import JobHandling
from .heartbeat import DEFAULT_GRACE, IDLE_CHECK, STOP, TOUCH, Grace, Heartbeat
from .prefetch import ACK_WAIT, WAITING, Done, keep
from .presence import Presence
from .taskrun import TaskRun, TaskRunner

T = TypeVar("T")
log = logging.getLogger("sqlq.worker")
#: Seconds between the turns of a loop that met a lost connection (each call waits too).
OUTAGE_PAUSE = 0.5


def first_finished(running: set[asyncio.Task[None]],
                   timeout: float | None = None) -> Awaitable[Any]:
    """Wait until one of the tasks running now ends (or ``timeout`` passes).

    The set is copied here, while the caller has just seen it non-empty: the wait itself
    starts a loop turn later, when the done callbacks of tasks that ended meanwhile may
    have emptied ``running``, and ``asyncio.wait`` refuses an empty set. Tasks already
    done make the wait return at once.
    """
    return asyncio.wait(set(running), timeout=timeout, return_when=asyncio.FIRST_COMPLETED)


class AsyncWorker:
    """Reserves jobs from ``tubes`` and runs up to ``concurrency`` of them at once.

    Args:
        queue: the queue to work on (this worker's own: it owns the reservations).
        task_runner: decodes jobs into task calls (the synchronous worker's).
        tubes: the tubes to watch.
        concurrency: jobs running at once.
        burst: return as soon as no job is ready and none runs.
        grace: seconds running jobs may go on after a stop is requested.
        prefetch: jobs claimed per commit beyond the free slots, plus one; None adapts
            to how long jobs take (see :mod:`sqlq.work.prefetch`); 1 fills the slots.
    """

    #: Claims, acknowledgements and outcomes, as the synchronous Worker's (run in the
    #: AsyncQueue's thread; a subclass may watch them: tests/chaos_agent.py).
    handling_class: type[JobHandling] = JobHandling

    def __init__(self, queue: Queue, task_runner: TaskRunner, tubes: Sequence[str], *,
                 concurrency: int = 1, burst: bool = False,
                 grace: float = DEFAULT_GRACE, prefetch: int | None = None) -> None:
        if concurrency < 1:
            raise ValueError(f"concurrency must be >= 1, not {concurrency}")
        self.handling = self.handling_class(queue, tubes, prefetch)
        self.queue = queue
        self.runner = task_runner
        self.concurrency = concurrency
        self.burst = burst
        self.grace = grace
        self._grace = Grace(grace)
        self.stopping = False
        self.hurry = False
        self.abandoned = False  # a plain task's thread was left running past the grace
        self.processed = 0
        self._blocked: asyncio.Future[Any] | None = None  # what the loop awaits: a slot, a job
        self._running: set[asyncio.Task[None]] = set()
        #: Once a second while tasks run: which of them were cancelled (one read for all).
        self._cancels = CancelCheck(queue)
        #: The running tasks' jobs and, for each, what its _execute waits on to stop it.
        self._executing: dict[int, tuple[Job, asyncio.Future[None]]] = {}
        self._ran: list[tuple[Job, float]] = []  # (job, seconds) of runs not yet counted

    @property
    def tubes(self) -> list[str]:
        return self.handling.tubes

    def request_stop(self) -> None:
        """Stop reserving now; a second call also stops the running jobs (no grace)."""
        if self.stopping:
            self.hurry = True
            for task in self._running:
                task.cancel()
        self.stopping = True
        self._grace.update(time.monotonic(), True, self.hurry)
        if self._blocked is not None:
            self._blocked.cancel()  # a cancelled reserve leaves no lease behind

    def install_signal_handlers(self) -> None:
        """SIGTERM and SIGINT request a stop from now on, before the loop runs: a signal
        between the worker's "watching" line and :meth:`main`'s own handlers (which
        replace these) stops it cleanly, exit 0, instead of killing the process."""
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, lambda _signum, _frame: self.request_stop())

    def close(self) -> None:
        """Record the last waits and runs (nothing else is held between runs)."""
        self.handling.close()

    def run(self) -> int:
        """Work until stopped (or, in burst mode, until no job is ready); return jobs run."""
        return asyncio.run(self.main())

    async def main(self) -> int:
        """:meth:`run`'s coroutine, for a caller with a loop of its own."""
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            with contextlib.suppress(NotImplementedError, RuntimeError):  # not the main thread
                loop.add_signal_handler(sig, self.request_stop)
        handling = self.handling
        async with AsyncQueue(self.queue) as aq:
            try:
                try:
                    await self._work_through_outages(aq)
                finally:  # whatever ended the loop (an error too: W4, whose finished
                    # jobs ran again), the batch not started goes back at once, the
                    # running jobs end within the grace and the finished ones are deleted
                    try:
                        await aq.call_in_thread(functools.partial(
                            handling.give_back_waiting, "the worker is stopping"))
                    finally:
                        await self._wind_down()
                        await aq.call_in_thread(handling.ack)
                await aq.call_in_thread(functools.partial(self._record, [], self._take_runs()))
            finally:
                for sig in (signal.SIGTERM, signal.SIGINT):
                    with contextlib.suppress(NotImplementedError, RuntimeError):
                        loop.remove_signal_handler(sig)
        return self.processed

    async def _work_through_outages(self, aq: AsyncQueue) -> None:
        """The reserve loop, taken up again after a lost connection that reached it: a
        worker waits for its server and keeps what it holds (the keeper keeps the
        leases), as the verbs it calls do; it never exits on one (W4)."""
        while True:
            try:
                return await self._reserve_loop(aq)
            except Disconnected as exc:
                log.warning("%s; the worker goes on once the database is back", exc)
                await self._until_stopped(asyncio.sleep(OUTAGE_PAUSE))

    async def _reserve_loop(self, aq: AsyncQueue) -> None:
        handling = self.handling
        holding = handling.holding
        while not self.stopping:
            if handling.orphaned():
                self.request_stop()
                break
            due = self._due_in()
            if due == 0:
                await aq.call_in_thread(handling.tend)
                continue
            if len(self._running) >= self.concurrency:
                await self._until_stopped(first_finished(self._running, due))
                continue
            job = await self._from_batch(aq)
            if job is None:
                free = self.concurrency - len(self._running)
                jobs = await self._claim(aq, free + handling.batch.next() - 1)
                if not jobs:
                    if self.burst and not self.stopping:
                        if not self._running:
                            break
                        await self._until_stopped(first_finished(self._running))
                    continue
                holding.add(jobs[1:])
                job = jobs[0]
            task = asyncio.ensure_future(self._run(aq, AsyncJob(aq, job)))
            self._running.add(task)
            task.add_done_callback(self._running.discard)
            handling.presence.started(job.id)
            task.add_done_callback(functools.partial(_ended, handling.presence, job.id))

    def _due_in(self) -> float | None:
        """Seconds until a held job needs a touch or the finished ones their delete."""
        holding = self.handling.holding
        dues = [d for d in (holding.touch_in(), holding.ack_in(time.monotonic()))
                if d is not None]
        return min(dues) if dues and min(dues) < float("inf") else None

    async def _from_batch(self, aq: AsyncQueue) -> Job | None:
        """The next job of the batch held, with most of its TTR ahead, or None."""
        holding = self.handling.holding
        while (job := holding.next_job()) is not None:
            if holding.started_fresh(job) or \
                    await aq.call_in_thread(functools.partial(keep, job, WAITING)):
                return job
            # lost while it waited: it runs elsewhere
        return None

    async def _claim(self, aq: AsyncQueue, size: int) -> list[Job]:
        """Up to ``size`` jobs claimed in one commit, which deletes the finished ones.

        With none finished, or none ready at once, it waits (costing no thread) up to
        :data:`~sqlq.work.heartbeat.IDLE_CHECK`, less while jobs run: a job finishing
        meanwhile waits no longer than :data:`~sqlq.work.prefetch.ACK_WAIT` for its delete.
        """
        handling = self.handling
        acks = handling.holding.take_done()
        jobs: list[Job] = []
        if acks:
            jobs = await aq.call_in_thread(functools.partial(handling.claim, size, 0, acks),
                                           pokes=bool(WAKES["delete_many"]))
        if not jobs and not self.stopping:
            timeout = 0.0 if self.burst else IDLE_CHECK
            if self._running:
                timeout = min(timeout, ACK_WAIT)
            touch = handling.holding.touch_in()
            if touch is not None:
                timeout = min(timeout, touch)
            claim = aq.reserve(self.tubes, timeout) if size == 1 else \
                aq.reserve_many(size, self.tubes, timeout)
            got = await self._until_stopped(claim)
            jobs = [] if got is None else [j.sync for j in
                                           (got if isinstance(got, list) else [got])]
        await aq.call_in_thread(functools.partial(self._record, jobs, self._take_runs()))
        return jobs

    def _take_runs(self) -> list[tuple[Job, float]]:
        runs, self._ran = self._ran, []
        return runs

    def _record(self, jobs: list[Job], runs: list[tuple[Job, float]]) -> None:
        """Count the jobs just claimed and the runs ended without a trip to the thread.

        The recorder's counts live in the AsyncQueue's thread, as JobHandling.finish's do."""
        self.handling.reserved(jobs)
        durations = self.handling.durations
        for job, seconds in runs:
            durations.ran(job, seconds)
        self.handling.tick()

    async def _until_stopped(self, awaitable: Awaitable[T]) -> T | None:
        """``await awaitable``, or None if a stop request cancelled it."""
        future: asyncio.Future[T] = asyncio.ensure_future(awaitable)
        self._blocked = future
        try:
            return await future
        except asyncio.CancelledError:
            if self.stopping:
                return None
            raise
        finally:
            self._blocked = None

    async def _wind_down(self) -> None:
        """Let running jobs finish within the grace period; cancel (and release) the rest."""
        if not self._running:
            return
        running = set(self._running)
        left = self._grace.left(time.monotonic())
        if left is None or left > 0:
            _, late = await asyncio.wait(running, timeout=left)
        else:
            late = running
        for task in late:
            task.cancel()
        await asyncio.gather(*running, return_exceptions=True)

    async def _run(self, aq: AsyncQueue, job: AsyncJob) -> None:
        if control.was_cancelled(job.id):  # while it waited in the batch
            control.forget(job.id)
            log_cancelled(job.sync, "", "dropped before it started")
            return
        operations = self.queue.operations
        # Its span, when tracing is on; a retry's looks up its last failed run's, in the
        # queue's thread (a first run's needs no look).
        span = operations.processing(job.sync) if job.reserves == 1 else \
            await aq.call_in_thread(lambda: operations.processing(job.sync))
        with span:
            return await self._run_job(aq, job)

    async def _run_job(self, aq: AsyncQueue, job: AsyncJob) -> None:
        started = time.monotonic()
        running = self.runner.start(job.sync)
        name = running.name
        if isinstance(running, TaskRun):
            outcome = await self._execute(aq, job, running)
        else:
            outcome = running.wait(0.0)  # it ended before it started (an unknown task...)
        duration = time.monotonic() - started
        handling = self.handling
        handling.batch.observe(duration)
        if control.was_cancelled(job.id):
            control.forget(job.id)  # the job is gone: nothing to write
            log_cancelled(job.sync, name, f"its run ended after {duration:.1f}s")
            return
        control.forget(job.id)
        if outcome is None:
            return

        if outcome.status == "done" and outcome.result is None and not snoozed(job.sync):
            # Nothing to write until the next claim deletes it: no trip to the thread (the
            # run is counted in it with that claim).
            self._ran.append((job.sync, duration))
            handling.holding.finished(Done(job.sync, name, duration, time.monotonic()))
        else:
            def finish() -> None:
                done = handling.finish(job.sync, name, outcome, duration)
                if done is not None:
                    handling.holding.finished(done)  # deleted with the next claim

            await aq.call_in_thread(finish)
        self.processed += 1

    async def _execute(self, aq: AsyncQueue, job: AsyncJob,
                       run: TaskRun) -> runner.Outcome | None:
        """Run the task, touching or cancelling it on time; None if it was given back."""
        call = asyncio.ensure_future(run.run_async())
        beat = Heartbeat(job.sync, run.name, run.keepalive, run.is_async, self.handling.clock,
                         time.monotonic(), run.timeout)
        stop: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._executing[job.id] = (job.sync, stop)
        try:
            while True:
                now = time.monotonic()
                wait = beat.wait(now)
                check = max(self._cancels.wait(now), 0.0)
                waits: set[asyncio.Future[Any]] = {call, stop}
                done, _ = await asyncio.wait(waits, timeout=check if wait is None
                                             else min(max(wait, 0.0), check),
                                             return_when=asyncio.FIRST_COMPLETED)
                if call in done:
                    return call.result()
                if stop.done():
                    if run.is_async:  # a plain function's thread goes on: current_job() tells it
                        call.cancel()
                        with contextlib.suppress(asyncio.CancelledError, Exception):
                            await call
                        return None
                    stop = asyncio.get_running_loop().create_future()  # wait for its end
                    self._executing[job.id] = (job.sync, stop)
                await self._look_for_cancelled(aq)
                presence = self.handling.presence
                if presence.take_due(time.monotonic()):  # busy, and a fresh heartbeat
                    await aq.call_in_thread(presence.beat)
                step = beat.step(time.monotonic())
                if step == TOUCH:
                    await aq.call_in_thread(beat.touch)  # job.touch() in the thread, logged
                elif step == STOP and not run.is_async:  # past its timeout: told, not stopped
                    control.mark_timed_out(job.id, run.timeout or 0.0)
                elif step == STOP:
                    call.cancel()
                    with contextlib.suppress(asyncio.CancelledError):
                        await call
                    return runner.failed(beat.stop_reason("cancelled"), run.task.policy,
                                         error=TIMED_OUT)
        except asyncio.CancelledError:
            # The grace period ran out (or a second signal): stop the task, give the job back.
            call.cancel()
            if not run.is_async:
                self.abandoned = True  # a thread cannot be stopped; the process will exit
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await asyncio.wait({call}, timeout=1.0)
            reason = "the grace period ran out"
            await aq.call_in_thread(lambda: self.handling.give_back(job.sync, reason, run.name))
            return None
        finally:
            self._executing.pop(job.id, None)

    async def _look_for_cancelled(self, aq: AsyncQueue) -> None:
        """Once a second (whichever run's wait ends first): one read for every running job
        and the batch's; each cancelled run is told to stop (cancel.py)."""
        now = time.monotonic()
        if self._cancels.wait(now) > 0:
            return
        jobs = [job for job, _ in self._executing.values()]
        found = await aq.call_in_thread(
            lambda: self._cancels.check(now, [*jobs, *self.handling.holding.waiting]))
        for job in found:
            entry = self._executing.get(job.id)
            if entry is not None and not entry[1].done():
                log_cancelled(job, "", "its task is cancelled (or, a plain function, told at "
                              "its next sqlq.current_job())")
                entry[1].set_result(None)


def _ended(presence: Presence, job_id: int, task: asyncio.Task[None]) -> None:
    presence.ended(job_id)
