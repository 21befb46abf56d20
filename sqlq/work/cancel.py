"""How a worker learns that a job it holds was cancelled (``Queue.cancel``), within a second.

Cancel deletes the job and remembers (id, lease) in ``sqlq_cancelled``
(sqlq/control.py). While a worker runs jobs, the driver that already wakes at least
every :data:`~sqlq.work.heartbeat.POLL` seconds to heartbeat (the synchronous loop
watching a COMMAND, the watchdog thread watching a task, a task of the async worker's
loop) asks :class:`CancelCheck` once every :data:`CHECK_EVERY` seconds: one read, by
primary key, of that small table for all the jobs it holds (running, and claimed in its
batch), never one per job. An idle worker reads nothing. The cost: one read a second
per busy worker process (SQLite: a read transaction on the file, some microseconds; on
PostgreSQL a round trip). A commit notification (inotify, LISTEN) was the other way:
the wakeup that reserve sleeps on fires for every commit of every process, so a busy
queue would wake each running job's watcher far more often than once a second.

What the worker then does (worker.py, watchdog.py, aworker.py): a COMMAND's process
group is killed; an ``async def`` task is cancelled; a plain function, which Python
cannot interrupt, is marked so that its next ``sqlq.current_job()`` raises
JobCancelled (as its next ``job.touch()`` or ``job.progress()`` would anyway). Nothing is
written for a cancelled run: the job is gone.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

from .. import control
from ..errors import DatabaseError
from ..model import Job
from ..queue import Queue
from .heartbeat import fields

log = logging.getLogger("sqlq.worker")

#: Seconds between a worker's looks for cancelled jobs while it runs jobs.
CHECK_EVERY = 1.0


class CancelCheck:
    """Once every :data:`CHECK_EVERY` seconds at most: which of the held jobs were cancelled.

    Args:
        queue: the worker's queue.
    """

    def __init__(self, queue: Queue) -> None:
        self._operations = queue.operations
        self._next = 0.0

    def wait(self, now: float) -> float:
        """Seconds until the next look is due (0 or less: now)."""
        return self._next - now

    def check(self, now: float, jobs: Iterable[Job]) -> list[Job]:
        """If a look is due at ``now`` (time.monotonic()): the jobs among ``jobs`` that were
        cancelled, each marked (:func:`sqlq.control.was_cancelled`); else []."""
        if now < self._next:
            return []
        self._next = now + CHECK_EVERY
        held = [job for job in jobs if job.lease is not None
                and not control.was_cancelled(job.id)]
        if not held:
            return []
        try:
            ids = set(self._operations.cancelled_among([(job.id, job.lease) for job in held
                                                        if job.lease is not None]))
        except DatabaseError as exc:  # the next look tries again
            log.debug("could not look for cancelled jobs: %s", exc)
            return []
        found = [job for job in held if job.id in ids]
        for job in found:
            control.mark_cancelled(job.id)
        return found


def log_cancelled(job: Job, name: str, how: str) -> None:
    """The log line of a run stopped (or dropped) because its job was cancelled."""
    log.warning("job %d %s cancelled: %s", job.id, name, how,
                extra=fields(job, name, outcome="cancelled", reason=how))

