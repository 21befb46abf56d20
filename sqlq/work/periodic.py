"""``@q.periodic``: tasks enqueued on a schedule, once per slot however many workers run.

A schedule divides time into *slots*: ``every=300`` makes slots of five minutes
aligned on the epoch (so every process agrees where they start without talking),
``cron="*/5 * * * *"`` makes one slot per match of the expression in local time
(parsed by ``cronsim``, which also handles DST). A periodic job is put at the start
of its slot; the body is an ordinary task call with no arguments, run by whichever
worker watches the task's tube.

Who enqueues: every worker process that imported periodic tasks runs one
:class:`Scheduler` thread, which sleeps until the next slot starts (no polling) and
then tries to enqueue it. Exactly one try succeeds, because the put and a forward-only
move of ``sqlq_periodic.last_slot`` happen in one transaction (migration 0003): a
slot at or before the recorded one is refused, even after its job ran and was
deleted, which a unique key alone could not promise. The job also carries
``unique_key="periodic:<name>:<slot ms>"``, so it is recognisable in ``peek``.

Slots missed while no worker ran are not caught up: the next one is enqueued on
time, as cron would do.

Slots are times on the queue's clock (``Queue(clock=)``, the wall clock unless a test
passes another), the time its jobs are put at; the thread sleeps in real seconds, so a
clock moved ahead by a test is noticed at the next wake-up.
"""

from __future__ import annotations

import logging
import math
import threading
from collections.abc import Iterable
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from ..durations import format_duration

if TYPE_CHECKING:
    from ..queue import Queue
    from .tasks import Task

log = logging.getLogger("sqlq.periodic")


class Schedule:
    """When a periodic task's slots start: ``every`` seconds, or a cron expression.

    Args:
        every: slot length in seconds (> 0), slots aligned on the Unix epoch.
        cron: a five-field cron expression (six with seconds), in local time.
    """

    def __init__(self, every: float | None = None, cron: str | None = None) -> None:
        if (every is None) == (cron is None):
            raise TypeError("give a periodic task every=SECONDS or cron='...', exactly one")
        self.every_ms: int | None = None
        self.cron = cron
        if every is not None:
            if isinstance(every, bool) or not isinstance(every, (int, float)) \
                    or math.isnan(every) or every <= 0:
                raise ValueError(f"every must be a number of seconds > 0, not {every!r}")
            self.every_ms = max(1, round(every * 1000))
        else:
            from cronsim import CronSim, CronSimError

            if not isinstance(cron, str):
                raise TypeError(f"cron must be a str, not {type(cron).__name__}")
            try:
                CronSim(cron, datetime.now().astimezone())
            except CronSimError as exc:
                raise ValueError(f"cron {cron!r} is not a cron expression: {exc}") from None

    def __repr__(self) -> str:
        if self.every_ms is not None:
            return f"Schedule(every={self.every_ms / 1000:g})"
        return f"Schedule(cron={self.cron!r})"

    def __str__(self) -> str:
        """For people (the dashboard): ``every 5m00s`` or ``cron */5 * * * *``."""
        if self.every_ms is not None:
            return f"every {format_duration(self.every_ms / 1000)}"
        return f"cron {self.cron}"

    def slot_at(self, t_ms: int) -> int:
        """Start (ms) of the slot that contains ``t_ms``: the latest start at or before it."""
        if self.every_ms is not None:
            return t_ms - t_ms % self.every_ms
        from cronsim import CronSim

        # cronsim's reverse iteration is strictly before its start: start one second on.
        after = _local(t_ms).replace(microsecond=0) + timedelta(seconds=1)
        return _ms(next(CronSim(self.cron or "", after, reverse=True)))

    def next_slot(self, t_ms: int) -> int:
        """Start (ms) of the first slot that starts after ``t_ms``."""
        if self.every_ms is not None:
            return self.slot_at(t_ms) + self.every_ms
        from cronsim import CronSim

        return _ms(next(CronSim(self.cron or "", _local(t_ms))))


def _local(t_ms: int) -> datetime:
    return datetime.fromtimestamp(t_ms / 1000).astimezone()


def _ms(moment: datetime) -> int:
    return round(moment.timestamp() * 1000)


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
                     _local(slot).isoformat(timespec="seconds"),
                     extra={"job": job_id, "tube": task.tube, "task": task.name})


def start_scheduler(queue: Queue, tasks: Iterable[Task[Any, Any]]) -> Scheduler | None:
    """A running :class:`Scheduler` for the periodic ones among ``tasks``, or None if none."""
    scheduler = Scheduler(queue, tasks)
    return scheduler.start() if scheduler.tasks else None
