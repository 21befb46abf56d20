"""``@q.periodic``: tasks enqueued on a schedule, once per slot however many workers run.

A schedule divides time into *slots*: ``every=300`` makes slots of five minutes
aligned on the epoch (so every process agrees where they start without talking),
``cron="*/5 * * * *"`` makes one slot per match of the expression in local time
(parsed by ``cronsim``, which also handles DST). A periodic job is put at the start
of its slot; the body is an ordinary task call with no arguments, run by whichever
worker watches the task's tube.

Who enqueues: every worker process that imported periodic tasks runs one
``Scheduler`` thread (``work/scheduler.py``; this module is the schedule alone, below the
Queue whose ``@q.periodic`` makes one), which sleeps until the next slot starts (no polling) and
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

import math
from datetime import datetime, timedelta

from ..core.durations import format_duration


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
        after = local_time(t_ms).replace(microsecond=0) + timedelta(seconds=1)
        return _ms(next(CronSim(self.cron or "", after, reverse=True)))

    def next_slot(self, t_ms: int) -> int:
        """Start (ms) of the first slot that starts after ``t_ms``."""
        if self.every_ms is not None:
            return self.slot_at(t_ms) + self.every_ms
        from cronsim import CronSim

        return _ms(next(CronSim(self.cron or "", local_time(t_ms))))


def local_time(t_ms: int) -> datetime:
    """A slot's time (ms since the epoch) in local time: where cron counts, and logs say."""
    return datetime.fromtimestamp(t_ms / 1000).astimezone()


def _ms(moment: datetime) -> int:
    return round(moment.timestamp() * 1000)
