"""The thread that enqueues periodic tasks at the start of their slots (see
``tasks/periodic.py`` for the schedules, and for why exactly one try per slot succeeds).

A worker's part, above the Queue it puts into: ``sqlq work`` starts one per process
that imported periodic tasks.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from ..tasks.periodic import local_time

if TYPE_CHECKING:
    from ..queue import Queue
    from ..tasks.task import Task

log = logging.getLogger("sqlq.periodic")


def slot_key(task: Task[Any, Any], slot_ms: int) -> str:
    """The unique key of a periodic task's job for one slot."""
    return f"periodic:{task.name}:{slot_ms}"


def enqueue_slot(queue: Queue, task: Task[Any, Any], slot_ms: int) -> int | None:
    """Put ``task``'s job for the slot starting at ``slot_ms``, unless that slot (or a later
    one) was enqueued already; the new job's id, or None."""
    return queue.enqueue_periodic(task.name, slot_ms, task.message(), tube=task.tube,
                                  priority=task.priority, ttr=task.ttr,
                                  unique_key=slot_key(task, slot_ms))


class Scheduler:
    """A thread that enqueues periodic tasks at the start of their slots.

    Args:
        queue: where to put the jobs (thread-safe; the worker's own Queue).
        tasks: the periodic tasks (those with a ``schedule``).
    """

    def __init__(self, queue: Queue, tasks: Iterable[Task[Any, Any]]) -> None:
        self.queue = queue
        self.tasks = [t for t in tasks if t.schedule is not None]
        self._clock = queue.engine.clock
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="sqlq-periodic", daemon=True)

    def start(self) -> Scheduler:
        """Start the thread; returns self."""
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop the thread and wait for it (it is asleep, or finishing one put)."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(5)

    def _run(self) -> None:
        clock = self._clock
        now = clock()
        due = {t.name: t.schedule.next_slot(now) for t in self.tasks if t.schedule}
        while True:
            wait_ms = min(due.values()) - clock()
            if self._stop.wait(max(0.0, wait_ms / 1000)):
                return
            now = clock()
            for task in self.tasks:
                assert task.schedule is not None
                if due[task.name] > now:
                    continue
                slot = task.schedule.slot_at(now)
                due[task.name] = task.schedule.next_slot(now)
                self._enqueue(task, slot)

    def _enqueue(self, task: Task[Any, Any], slot: int) -> None:
        try:
            job_id = enqueue_slot(self.queue, task, slot)
        except Exception:  # noqa: BLE001 - a bad moment must not end the schedule
            log.exception("periodic task %s: could not enqueue the slot at %d", task.name, slot)
            return
        if job_id is not None:
            log.info("periodic task %s: job %d put for its slot at %s", task.name, job_id,
                     local_time(slot).isoformat(timespec="seconds"),
                     extra={"job": job_id, "tube": task.tube, "task": task.name})


def start_scheduler(queue: Queue, tasks: Iterable[Task[Any, Any]]) -> Scheduler | None:
    """A running :class:`Scheduler` for the periodic ones among ``tasks``, or None if none."""
    scheduler = Scheduler(queue, tasks)
    return scheduler.start() if scheduler.tasks else None
