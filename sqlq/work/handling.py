"""What both worker loops do with the jobs they hold, and the log line of each outcome.

The synchronous :class:`~sqlq.work.worker.Worker` and the event-loop
:class:`~sqlq.work.aworker.AsyncWorker` differ in how they wait and run; they claim,
acknowledge and settle jobs the same way, through one :class:`JobHandling` each:

* :meth:`JobHandling.claim` deletes the jobs finished since the last claim and
  claims the next batch in one commit (``reserve(delete=)``, ``reserve_many(n,
  delete=)``); :meth:`JobHandling.ack` deletes them without a claim;
* :meth:`JobHandling.finish` settles a run's :class:`~sqlq.work.runner.Outcome`: a
  success without a result waits (as a :class:`~sqlq.work.prefetch.Done`) for the
  next claim to delete it; a result is stored, a failure retried or buried under
  the job's :class:`~sqlq.tasks.retry.RetryPolicy` and kept as an attempt, each its
  own commit at once; a lost lease is logged;
* :meth:`JobHandling.give_back` releases a job its worker will not run after all.

The asynchronous worker calls these in its AsyncQueue's thread: they block.
"""

from __future__ import annotations

import contextlib
import logging
import os
import time
from collections.abc import Sequence

from ..attempts import BURIED, LOST, RETRIED, Attempt, worker_identity
from ..errors import Disconnected, JobCancelled, JobLost
from ..model import Job, check_tubes
from ..queue import Queue
from ..steps import snoozed
from . import runner
from .heartbeat import fields
from .horizon import HorizonWatch
from .prefetch import BatchSize, Done, Holding
from .presence import Presence
from .recorder import Recorder

log = logging.getLogger("sqlq.worker")


class JobHandling:
    """Claims, acknowledgements and outcomes for one worker loop (see the module docstring).

    Args:
        queue: the queue to work on (the worker's own: it owns the reservations).
        tubes: the tubes to watch.
        prefetch: jobs claimed per commit; None adapts to how long jobs take (see
            :mod:`sqlq.work.prefetch`); 1 claims one at a time.
    """

    def __init__(self, queue: Queue, tubes: Sequence[str], prefetch: int | None = None) -> None:
        self.queue = queue
        self.tubes = check_tubes(list(tubes))
        #: The queue's clock (ms): the time of the jobs' leases and of the attempts kept.
        self.clock = queue.engine.clock
        self.batch = BatchSize(prefetch)
        #: Jobs claimed and not started, and jobs done and not yet deleted.
        self.holding = Holding(self.clock)
        #: Waits and runs for the histograms of /metrics (added to the database every 10 s).
        self.durations = Recorder(queue)
        #: This process's row in the workers registry (written at most every 5 s).
        self.presence = Presence(queue, self.tubes)
        #: What holds back the cleanup of deleted jobs: a look every 30 s, warnings logged.
        self.horizon = HorizonWatch(queue)
        supervisor = os.environ.get("SQLQ_SUPERVISOR_PID", "")
        self._supervisor = int(supervisor) if supervisor.isdigit() else None

    def orphaned(self) -> bool:
        """True if this worker's supervisor is gone (a SIGKILLed supervisor cannot stop us)."""
        return self._supervisor is not None and os.getppid() != self._supervisor

    def close(self) -> None:
        """Record the last waits and runs; leave the workers registry."""
        self.durations.flush()
        self.presence.stop()

    def tick(self) -> None:
        """Once per turn of the loop: what is written now and then (the histograms every
        10 s, the registry's row every 5 s) or looked at (the horizon, every 30 s), if it
        is due."""
        self.durations.flush_if_due()
        self.presence.beat_if_due()
        if time.monotonic() >= self.horizon.due:
            self.horizon.check()

    # -- claims and acknowledgements ---------------------------------------------------------

    def reserved(self, jobs: Sequence[Job]) -> None:
        """Jobs were just claimed: count their waits (in memory)."""
        for job in jobs:
            self.durations.reserved(job)

    def claim(self, size: int, timeout: float, acks: list[Done]) -> list[Job]:
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
            self.acked(acks, exc.job_ids or [job.id for job in delete], cut_off=exc.cut_off)
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
            self.ack_each(acks)
            return []
        self.acked(acks)
        return jobs

    def ack(self) -> None:
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
            self.acked(acks, exc.job_ids or [done.job.id for done in acks],
                       cut_off=exc.cut_off)
            return
        except Disconnected as exc:
            log.warning("%s; acknowledging %d finished job(s) again", exc, len(acks))
            self.ack_each(acks)
            return
        self.acked(acks)

    def ack_each(self, acks: list[Done]) -> None:
        """Acknowledge each job again after a commit of them all was cut off. A job that
        commit deleted is done (its finished record says so: ``Verbs.deleted_by``); one
        gone otherwise is logged as cut off: "done" must never be said falsely."""
        lost: list[int] = []
        for at, done in enumerate(acks):
            try:
                done.job.delete()
            except JobLost:
                lost.append(done.job.id)
            except Disconnected as exc:
                # The server is still away (longer than a reconnect waits): these stay
                # held, touched, and are acknowledged once it is back (W4: a worker that
                # exits here leaves its finished jobs to run again).
                log.warning("%s; %d finished job(s) kept, to acknowledge later", exc,
                            len(acks) - at)
                for held in acks[at:]:
                    self.holding.finished(held)
                acks = acks[:at]
                break
        if lost:
            with contextlib.suppress(Disconnected):  # away again: they stay in doubt
                first = self.queue.verbs.deleted_by(
                    [(done.job.id, done.job.reserves) for done in acks if done.job.id in lost])
                lost = [job_id for job_id in lost if job_id not in first]
        self.acked(acks, lost, cut_off=True)

    def acked(self, acks: list[Done], lost: Sequence[int] = (), *,
              cut_off: bool = False) -> None:
        """Log each acknowledged job: done, or lost (its lease had gone; ``cut_off``: or
        the first acknowledgement, cut off by a lost connection, deleted it)."""
        if not lost and not log.isEnabledFor(logging.INFO):
            return  # nothing to say: once per batch, not once per job
        for done in acks:
            if done.job.id not in lost:
                self.log_done(done)
            elif cut_off:
                self.cut_off(done.job, done.name, done.duration)
            else:
                self.lost(done.job, done.name, done.duration)

    def tend(self) -> None:
        """Between runs: touch the held jobs that need it, and delete the finished ones
        once one has waited :data:`~sqlq.work.prefetch.ACK_WAIT` for a claim."""
        self.holding.touch_due()
        if self.holding.ack_due(time.monotonic()):
            self.ack()

    # -- giving back -------------------------------------------------------------------------

    def give_back(self, job: Job, why: str, name: str = "") -> None:
        """Release ``job`` (ready at once): its worker will not run it, or not to the end."""
        try:
            job.release()
        except JobLost:
            return
        except Disconnected as exc:  # still ours: back when this process ends or its TTR runs out
            log.warning("%s; job %d not released (%s): it comes back when this worker "
                        "exits", exc, job.id, why)
            return
        log.info("job %d released: %s", job.id, why,
                 extra=fields(job, name, outcome="released", reason=why))

    def give_back_waiting(self, why: str) -> None:
        """Release the jobs of the batch that have not started (ready at once)."""
        for job in self.holding.take_waiting():
            self.give_back(job, why)

    # -- outcomes ----------------------------------------------------------------------------

    def finish(self, job: Job, name: str, outcome: runner.Outcome,
               duration: float) -> Done | None:
        """Settle a run of ``job`` that ended with ``outcome`` after ``duration`` seconds.

        Returns the :class:`~sqlq.work.prefetch.Done` to delete with the next claim for a
        success without a result; None when it was settled here (or lost)."""
        attempt = job.reserves
        self.durations.ran(job, duration)
        if snoozed(job):
            self.log_snoozed(job, name, duration)
            return None
        try:
            if outcome.status == "done":
                if outcome.result is None:
                    return Done(job, name, duration, time.monotonic())
                job.complete(outcome.result)
                self.log_done(Done(job, name, duration, time.monotonic()))
            elif outcome.status == "failed" and outcome.policy is not None \
                    and outcome.policy.should_retry(attempt):
                delay = outcome.policy.delay_for(attempt)
                self.queue.engine.end_attempt(
                    job, self._attempt(job, outcome, duration, RETRIED), delay)
                log.warning("job %d %s failed in %s (attempt %d), retry in %.1fs: %s", job.id,
                            name, _ms(duration), attempt, delay, outcome.reason,
                            extra=fields(job, name, duration, "retry", delay=round(delay, 3),
                                         reason=outcome.reason, **_traceback(outcome)))
            else:
                self.queue.engine.end_attempt(
                    job, self._attempt(job, outcome, duration, BURIED), None)
                log.error("job %d %s buried after %d attempt%s: %s", job.id, name, attempt,
                          "" if attempt == 1 else "s", outcome.reason,
                          extra=fields(job, name, duration, "buried", reason=outcome.reason,
                                       **_traceback(outcome)))
        except JobCancelled:
            log.warning("job %d %s cancelled: its run ended after %s, nothing recorded",
                        job.id, name, _ms(duration),
                        extra=fields(job, name, duration, "cancelled"))
        except Disconnected as exc:
            # Cut off (the server restarted, and stayed away longer than a reconnect
            # waits): the job stays reserved, and runs again once this worker exits or
            # its TTR runs out. The loop goes on (W4).
            log.warning("%s; the outcome of job %d %s (%s) is not recorded: it runs again",
                        exc, job.id, name, outcome.status,
                        extra=fields(job, name, duration, "lost", reason=str(exc)))
        except JobLost as exc:
            if exc.cut_off:
                self.cut_off(job, name, duration, outcome)
                return None
            if outcome.status != "done":
                # The failure is still worth keeping, beside the job's next run.
                self.queue.engine.keep_attempt(self._attempt(job, outcome, duration, LOST))
            self.lost(job, name, duration, outcome)
        return None

    def _attempt(self, job: Job, outcome: runner.Outcome, duration: float,
                 what: str) -> Attempt:
        """The attempt to keep of a failed run of ``job`` that ended just now."""
        host, pid = worker_identity()
        return Attempt(job.id, job.reserves, self.clock() - round(duration * 1000), duration,
                       host, pid, what, outcome.error, outcome.reason, outcome.traceback,
                       location=outcome.location)

    # -- one log line per outcome ------------------------------------------------------------

    def log_snoozed(self, job: Job, name: str, duration: float) -> None:
        """Log a run that gave its job back with ``job.snooze`` (nothing else to record)."""
        log.info("job %d %s snoozed after %s: given back, no attempt counted", job.id, name,
                 _ms(duration),
                 extra=fields(job, name, duration, "snoozed"))

    def log_done(self, done: Done) -> None:
        """Log a job deleted (or completed) after a successful run."""
        if not log.isEnabledFor(logging.INFO):
            return  # a no-op job costs less than building this line's fields
        log.info("job %d %s done in %s (tube %s, attempt %d)", done.job.id, done.name,
                 _ms(done.duration), done.job.tube, done.job.reserves,
                 extra=fields(done.job, done.name, done.duration, "done"))

    def cut_off(self, job: Job, name: str, duration: float,
                outcome: runner.Outcome | None = None) -> None:
        """Log a run whose acknowledgement (delete, complete, release, bury) was cut off
        by a lost connection and, made again, found the lease gone. Most likely the first
        one committed unseen: not "its TTR ran out", which the reliability run found said
        after a restart."""
        status = "done" if outcome is None else outcome.status
        log.warning("job %d %s %s in %s; its acknowledgement was cut off by a lost "
                    "connection and the lease is gone: settled by that acknowledgement, "
                    "or taken by another worker if its lease ran out meanwhile", job.id,
                    name, status, _ms(duration), extra=fields(job, name, duration, status))

    def lost(self, job: Job, name: str, duration: float,
             outcome: runner.Outcome | None = None) -> None:
        """Log a run that ended after its reservation was lost: someone else has the job."""
        failed = outcome is not None and outcome.status != "done"
        log.warning("job %d %s finished in %s after its reservation was lost (TTR ran out): "
                    "%s, it runs again", job.id, name, _ms(duration),
                    f"its failure kept ({outcome.reason})" if failed and outcome is not None
                    else "nothing recorded",
                    extra=fields(job, name, duration, "lost",
                                 **(_traceback(outcome) if outcome else {})))


def _traceback(outcome: runner.Outcome) -> dict[str, str]:
    """The log record's ``traceback`` field (text and JSON logs show it), if any."""
    return {"traceback": outcome.traceback} if outcome.traceback else {}


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:.1f}ms" if seconds < 10 else f"{seconds:.1f}s"
