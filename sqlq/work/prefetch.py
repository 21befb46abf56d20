"""``sqlq work --prefetch``: how many jobs a worker claims per commit, and what it holds meanwhile.

A worker that claims one job per commit pays a commit (an fsync in full mode) per
job, which is most of the cost of a short job. Claiming several in one commit and
acknowledging the finished ones with the next claim
(``reserve_many(n, delete=done)``) pays one commit per batch instead. Two things
must not get worse for it:

* **sharing**: jobs a worker holds are jobs its siblings cannot run. So the
  default (:class:`BatchSize` without a fixed size) claims about
  :data:`BATCH_BUDGET` seconds of work at a time, measured from the jobs' own run
  times: no-op jobs batch up to :data:`MAX_PREFETCH`, millisecond jobs by tens,
  jobs of :data:`BATCH_BUDGET` or more one at a time, as without prefetch. It
  starts at one job and at most doubles per claim, so a fresh worker (a restarted
  one too) holds little until it has seen how long jobs take.
* **the TTR**: a job waiting in a batch must not lose its reservation before it
  runs, nor a finished one before it is acknowledged. :class:`Holding` keeps those
  jobs and touches any of them once 80% of its TTR has passed (the heartbeat's
  rule), from the main thread between jobs and from the watchdog while one runs.
  And a job starts with at least 80% of its TTR ahead (:meth:`Holding.started_fresh`,
  else a touch first), as if it had been claimed on its own.

Both workers use this policy: the synchronous :class:`~sqlq.work.worker.Worker`
holds its running job and the rest of a batch; the ``--concurrency`` one
(:mod:`sqlq.work.aworker`) holds its running jobs and the same rest, a claim
filling its free slots plus :meth:`BatchSize.next` less one.
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from dataclasses import dataclass

from ..core.durations import now_ms
from ..errors import Disconnected, JobLost
from ..model import MAX_BATCH, Job
from .heartbeat import HEARTBEAT, Clock, retry_touch_in, touch_at

log = logging.getLogger("sqlq.worker")

#: The adaptive default's bound on jobs per claim.
MAX_PREFETCH = 64
#: Seconds of work (by measured run times) the adaptive default claims at a time. A
#: commit costs well under a millisecond, so batching jobs longer than this would
#: save nothing worth the work taken from sibling workers.
BATCH_BUDGET = 0.02
#: Weight of the newest run time in the running average (a slow job counts at once).
_WEIGHT = 0.3
#: A finished job waits this long at most for the next claim to acknowledge it.
ACK_WAIT = 0.1
#: What a job held in a batch is doing, for the log.
WAITING = "waiting in a prefetched batch"


def parse_prefetch(value: object) -> int | None:
    """``--prefetch``'s value: ``auto`` (None: adapt) or a whole number of jobs >= 1."""
    if value is None or (isinstance(value, str) and value.strip().lower() == "auto"):
        return None
    if isinstance(value, bool):
        raise TypeError(f"prefetch must be 'auto' or a number of jobs, not {value!r}")
    n: int | None = None
    if isinstance(value, int):
        n = value
    elif isinstance(value, str) and value.strip().isascii() and value.strip().isdigit():
        n = int(value)
    if n is None:
        raise ValueError(f"{value!r} is not 'auto' or a number of jobs")
    if not 1 <= n <= MAX_BATCH:
        raise ValueError(f"prefetch must be 'auto' or from 1 to {MAX_BATCH}, not {n}")
    return n


class BatchSize:
    """How many jobs the next claim asks for: ``fixed``, or adapted to run times.

    Args:
        fixed: always claim this many (``--prefetch N``); None adapts (see the module).
    """

    def __init__(self, fixed: int | None = None) -> None:
        if fixed is not None and fixed < 1:
            raise ValueError(f"prefetch must be >= 1, not {fixed}")
        self.fixed = fixed
        self.mean: float | None = None  # running average of run times (seconds)
        self._current = 1

    def observe(self, seconds: float) -> None:
        """A run ended after ``seconds``."""
        self.mean = seconds if self.mean is None else \
            _WEIGHT * seconds + (1 - _WEIGHT) * self.mean

    def next(self) -> int:
        """The size of the next claim."""
        if self.fixed is not None:
            return self.fixed
        if self.mean is None:
            return 1
        target = MAX_PREFETCH if self.mean <= 0 else \
            max(1, min(MAX_PREFETCH, int(BATCH_BUDGET / self.mean)))
        self._current = min(target, self._current * 2)  # shrink at once, grow gently
        return self._current

    def expected(self, jobs: int) -> float | None:
        """Seconds ``jobs`` runs should take, or None before any was measured."""
        return None if self.mean is None else jobs * self.mean


@dataclass(slots=True)  # one per job: made and read faster without a __dict__
class Done:
    """A job that succeeded and waits to be deleted with the next claim."""

    job: Job
    name: str
    duration: float
    finished: float  # time.monotonic() when it ended


class Holding:
    """The jobs a worker holds but is not running: claimed and waiting, or done and
    waiting for their acknowledgement. Thread-safe: the watchdog touches them while
    the main thread runs a job.

    Args:
        clock: the queue's clock (ms), the time of the jobs' ``reserved_until``.
    """

    def __init__(self, clock: Clock = now_ms) -> None:
        self.waiting: deque[Job] = deque()
        self.done: list[Done] = []
        self._clock = clock
        self._lock = threading.Lock()
        #: No held job needs a touch before this (seconds on the queue's clock); kept low,
        #: never high.
        self._earliest = float("inf")

    def __bool__(self) -> bool:
        return bool(self.waiting or self.done)

    def add(self, jobs: list[Job]) -> None:
        """Jobs just claimed, to run in this order."""
        with self._lock:
            self.waiting.extend(jobs)
            self._earliest = min([self._earliest, *(touch_at(job) for job in jobs)])

    def next_job(self) -> Job | None:
        """The next waiting job, no longer held (the caller runs it), or None."""
        with self._lock:
            job = self.waiting.popleft() if self.waiting else None
            self._forget_if_empty()
            return job

    def started_fresh(self, job: Job) -> bool:
        """Start ``job`` from the batch as it is: no more than 20% of its TTR has passed.

        Otherwise the worker touches it first, so that it runs with at least 80% of its
        TTR ahead, about what it would have had if claimed on its own."""
        if job.reserved_until is None:
            return True
        return (job.reserved_until - self._clock()) / 1000 >= HEARTBEAT * job.ttr

    def take_waiting(self) -> list[Job]:
        """Every waiting job, no longer held (the caller gives them back)."""
        with self._lock:
            jobs = list(self.waiting)
            self.waiting.clear()
            self._forget_if_empty()
            return jobs

    def finished(self, done: Done) -> None:
        """A job succeeded: hold it until it is acknowledged."""
        with self._lock:
            self.done.append(done)
            self._earliest = min(self._earliest, touch_at(done.job))

    def take_done(self) -> list[Done]:
        """Every finished job, no longer held (the caller acknowledges them)."""
        with self._lock:
            done, self.done = self.done, []
            self._forget_if_empty()
            return done

    def _forget_if_empty(self) -> None:
        if not self.waiting and not self.done:
            self._earliest = float("inf")

    def ack_due(self, now: float) -> bool:
        """True if a finished job has waited :data:`ACK_WAIT` for the next claim."""
        return self.ack_in(now) == 0

    def ack_in(self, now: float) -> float | None:
        """Seconds until a finished job has waited :data:`ACK_WAIT` (0: now), None if none."""
        done = self.done
        return max(0.0, done[0].finished + ACK_WAIT - now) if done else None

    def touch_in(self) -> float | None:
        """Seconds until a held job may need a touch (0: now), None if none is held."""
        if not self:
            return None
        return max(0.0, self._earliest - self._clock() / 1000)

    def touch_due(self) -> None:
        """Touch every held job 80% into its lease; a lost one is dropped (logged)."""
        now = self._clock() / 1000
        if now < self._earliest:
            return  # the common case: one comparison per job
        with self._lock:
            for job in [j for j in self.waiting if touch_at(j) <= now]:
                if not keep(job, WAITING):
                    self.waiting.remove(job)
            for done in [d for d in self.done if touch_at(d.job) <= now]:
                if not keep(done.job, "finished, not yet acknowledged"):
                    self.done.remove(done)
            # A touch cut off by a lost connection left its job due: tried again soon
            # (retry_touch_in), not at once in a loop, nor a heartbeat later.
            self._earliest = min([_next_touch(j, now) for j in self.waiting]
                                 + [_next_touch(d.job, now) for d in self.done],
                                 default=float("inf"))


def _next_touch(job: Job, now: float) -> float:
    """When a held job touched (or tried) at ``now`` is next due."""
    due = touch_at(job)
    return due if due > now else now + retry_touch_in(job, now)


def keep(job: Job, what: str) -> bool:
    """Touch a held job; False (logged) if its reservation was lost."""
    try:
        job.touch()
    except JobLost:
        log.warning("job %d lost its reservation while %s; it may run again", job.id, what,
                    extra={"job": job.id, "tube": job.tube, "outcome": "lost"})
        return False
    except Disconnected as e:  # the lease stands (the owner session is kept): keep it
        log.warning("%s; job %d kept (%s)", e, job.id, what)
        return True
    log.debug("job %d touched (%s)", job.id, what)
    return True
