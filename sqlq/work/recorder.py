"""What a worker observed of waits and runs, added to the database now and then.

The worker calls :meth:`Recorder.reserved` with each job it reserves and
:meth:`Recorder.ran` with each run's outcome: in-memory additions, nothing
written. :meth:`Recorder.flush_if_due`, called once per turn of the loop, adds
them to the database at most every :data:`~sqlq.histograms.FLUSH_EVERY` seconds
(one short transaction), and :meth:`Recorder.flush` when the worker stops. A
flush that fails keeps its observations for the next one.
"""

from __future__ import annotations

import logging
import time

from ..errors import Error
from ..histograms import FLUSH_EVERY, Tally
from ..model import Job
from ..queue import Queue

log = logging.getLogger("sqlq.worker")


class Recorder:
    """One worker loop's observations of the wait and run histograms."""

    def __init__(self, queue: Queue, every: float = FLUSH_EVERY) -> None:
        self.queue = queue
        self.every = every
        self.tally = Tally()
        self._due = time.monotonic() + every

    def reserved(self, job: Job) -> None:
        """A job was just reserved: its wait, if it is its first reservation."""
        self.tally.reserved(job)

    def ran(self, job: Job, seconds: float) -> None:
        """A run of job ended after seconds, whatever its outcome."""
        self.tally.ran(job, seconds)

    def flush_if_due(self) -> None:
        if time.monotonic() >= self._due:
            self.flush()

    def flush(self) -> None:
        """Add what was observed since the last flush to the database."""
        self._due = time.monotonic() + self.every
        if not self.tally:
            return
        try:
            self.queue.record_durations(self.tally)
        except Error as e:
            log.warning("could not record wait and run times (kept for the next try): %s", e)
            return
        self.tally.clear()
