"""A worker process's row in the workers registry (:mod:`sqlq.core.registry`).

The loop tells :class:`Presence` which jobs start and end (in memory: a dict entry
and a counter, no write), and calls :meth:`Presence.beat_if_due` once per turn; so
does whatever already wakes while a job runs (the watchdog thread watching a task, the
loop watching a command, the async worker's tasks), so that the row stays fresh while
the worker is busy. The row is written when the worker starts, then at most every
:data:`~sqlq.core.registry.BEAT_S` seconds with its heartbeat, the job it runs and the runs
it ended, and also as soon as it misstates what runs: a job running for
:data:`SHOW_AFTER` that the row does not name, or a job it names that ended that long
ago with none running since. A stream of short jobs therefore writes nothing more than
the beat, and a long job costs two writes (its start, its end); it is deleted by
:meth:`Presence.stop`. A beat also takes the minute's
throughput sample when no process has yet (:mod:`sqlq.throughput`) and, once a
minute, deletes the rows of dead workers and prunes the finished records and results
past their retention (:meth:`sqlq.verbs.Operations.prune`). A beat that fails is logged and tried
again at the next: the registry is for people, and must never stop a worker.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Sequence

from .. import throughput
from ..core import registry
from ..errors import Error
from ..queue import Queue

log = logging.getLogger("sqlq.worker")

#: How often (at most) a worker deletes dead workers' rows and samples throughput, and
#: prunes finished records and results (sqlq/finished.py).
SWEEP_S = 60.0
#: Seconds a beat prunes at most (in transactions of a batch each).
PRUNE_BUDGET_S = 1.0
#: Seconds a job runs (or the worker idles after one) before its row says so without
#: waiting for the next beat: an operator sees a busy worker busy within a second or two.
SHOW_AFTER = 1.0


class Presence:
    """One worker process's registration (see the module docstring).

    Args:
        queue: the worker's queue (its owner token names the row).
        tubes: the tubes the worker watches.
        every: seconds between beats, at most.
    """

    def __init__(self, queue: Queue, tubes: Sequence[str],
                 every: float = registry.BEAT_S) -> None:
        self.queue = queue
        self.tubes = list(tubes)
        self.every = every
        self.jobs_done = 0
        # Ids of the jobs running, in start order, each with its start (monotonic). The
        # loop's thread alone writes it and jobs_done (the async worker's event loop; beats
        # also run in the watchdog's or the queue's thread and read a copy, made in one
        # step under the GIL): no lock on the per-job path.
        self._running: dict[int, float] = {}
        self._ended_at = 0.0  # monotonic: when the last run ended
        self._shown: int | None = None  # the job the row names (None: idle)
        self._beating = False  # a beat was decided and has not written yet
        self._due = 0.0  # monotonic: the first turn registers
        self._sweep_due = 0.0
        self._started_at: int | None = None
        self._token: str | None = None
        self._minute: int | None = None  # the last minute whose throughput sample was seen

    def started(self, job_id: int) -> None:
        """A run of job_id begins (in memory)."""
        self._running[job_id] = time.monotonic()

    def ended(self, job_id: int) -> None:
        """A run of job_id ended, whatever its outcome (in memory)."""
        self._running.pop(job_id, None)
        self._ended_at = time.monotonic()
        self.jobs_done += 1

    def beat_if_due(self) -> None:
        """Write the row if a beat is due or it misstates what runs (see the module
        docstring); cheap otherwise: a clock read and two compares."""
        if self.take_due(time.monotonic()):
            self.beat()

    def take_due(self, now: float) -> bool:
        """True if the row should be written at ``now`` (``time.monotonic()``); the caller
        then calls :meth:`beat` (the async worker, in its queue's thread). Until it has,
        this says False: one write for one decision."""
        if self._beating or not (now >= self._due or self._misstated(now)):
            return False
        self._beating = True
        return True

    def _misstated(self, now: float) -> bool:
        """The row names no job though one has run for SHOW_AFTER, or names one that ended
        SHOW_AFTER ago with none running since."""
        shown = self._shown
        if shown is None and not self._running:
            return False  # idle and shown idle: the common look between jobs
        running = self._running.copy()
        if shown is not None and shown in running:
            return False
        if running:
            return now - next(iter(running.values())) >= SHOW_AFTER
        return now - self._ended_at >= SHOW_AFTER

    def beat(self) -> None:
        """Write this worker's row now; now and then sweep and sample too."""
        now = time.monotonic()
        self._due = now + self.every
        backend, clock = self.queue.backend, self.queue.engine.clock
        operations = self.queue.operations
        # Shown from now, written or not: a failed write is tried again with the next beat,
        # not at every look (the watchdog looks four times a second).
        self._shown = job_id = next(iter(self._running.copy()), None)
        try:
            self._token = backend.owner_token()
            at = clock()
            if self._started_at is None:
                self._started_at = at
            done = self.jobs_done
            operations.beat_worker({
                "token": self._token, "host": os.uname().nodename, "pid": os.getpid(),
                "tubes": ",".join(self.tubes), "started_at": self._started_at,
                "seen_at": at, "job_id": job_id, "jobs_done": done})
            if now >= self._sweep_due:
                self._sweep_due = now + SWEEP_S
                operations.sweep_workers()
                # Finished records and results past their retention: a second of short
                # deletes at most, again at the next beat if that was not enough.
                if operations.prune(budget_s=PRUNE_BUDGET_S)["more"]:
                    self._sweep_due = now
            minute = at // throughput.MINUTE_MS
            if minute != self._minute:
                operations.sample_throughput(at)
                self._minute = minute
        except Error as e:
            log.warning("could not write this worker's row in the workers registry "
                        "(trying again in %gs): %s", self.every, e)
        finally:
            self._beating = False

    def stop(self) -> None:
        """Delete this worker's row (it stops); nothing if it never wrote one."""
        if self._token is None:
            return
        try:
            self.queue.operations.forget_workers([self._token])
        except Error as e:
            log.warning("could not remove this worker from the workers registry (its row "
                        "stops counting when its process ends): %s", e)
        self._token = None
