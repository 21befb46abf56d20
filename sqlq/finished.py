"""The record of finished jobs: what :meth:`sqlq.Queue.finished` returns, and retention.

Every job that ends leaves one small record (``sqlq_finished``), written in the
transaction that ends it: deleted by its holder after a run (``done``, whether it
completed with a result or not), deleted by id (``deleted``: an operator, the
dashboard, ``sqlq delete``) or cancelled (``cancelled``). ``peek`` and ``stats_job``
of such a job still say "not found" (beanstalkd's semantics); the record is read on
its own, here.

A record keeps the first :data:`BODY_HEAD` bytes of the body, not all of it: enough for
the dashboard's search (a task's name and first arguments, an order number) and a
record that stays small whatever the jobs carry (a body may be megabytes; keeping it
whole would write it twice on every delete).

Records are kept :data:`DEFAULT_MAX_AGE_S` and at most :data:`DEFAULT_MAX_COUNT` per
tube and outcome unless :meth:`sqlq.Queue.retention` says otherwise (for every tube,
or one); workers prune them once a minute (``Operations.prune``), in small batches.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from .steps import recorded_as_dicts

#: How a job ended.
DONE, DELETED, CANCELLED = "done", "deleted", "cancelled"
OUTCOMES = (DONE, CANCELLED, DELETED)
#: Bytes of the body a record keeps.
BODY_HEAD = 256
#: Kept this long (seconds) unless set otherwise: a week.
DEFAULT_MAX_AGE_S = 7 * 86400
#: And at most this many per tube and outcome.
DEFAULT_MAX_COUNT = 10_000
#: Records deleted per transaction when pruning: short writes that never stall the queue.
PRUNE_BATCH = 500
#: Records a body search reads per tube and outcome (the newest).
SEARCH_DEPTH = 100_000


def check_outcome(outcome: object) -> str:
    """One of :data:`OUTCOMES`."""
    if outcome not in OUTCOMES:
        raise ValueError(f"outcome must be one of {', '.join(OUTCOMES)}, not {outcome!r}")
    return outcome


@dataclass(frozen=True)
class Finished:
    """The record of a job that ended, as :meth:`sqlq.Queue.finished` returns it.

    Attributes:
        id: the job's id.
        tube: its tube.
        group: its group, or None.
        outcome: ``done`` (deleted by its holder after a run, with or without a
            result), ``deleted`` (deleted by id: ``q.delete(id)``, ``sqlq delete``, the
            dashboard) or ``cancelled``.
        ended_at: when it ended, ms since the epoch (as Job's times).
        worker: the owner token of the process that held it when it ended, or None.
        host: that worker's host name, while it is in the workers registry, else None.
        pid: that worker's process id, likewise.
        by: who deleted or cancelled it by id (``dashboard``, ``cli``, a ``by=`` of
            yours), or None.
        ran: seconds from its last reservation (or ``touch``) to its end, or None if it
            was not reserved when it ended.
        attempts: how many times it was reserved.
        created_at: when it was put, ms since the epoch.
        unique_key: its unique key, or None.
        body: the first 256 bytes of its body.
        result: its result (``Job.complete``) while kept, else None.
        steps: its durable steps (``job.step``) as ``stats_job`` gave them while it
            lived: each one's ``name``, ``value`` and ``finished_at`` (ms since the
            epoch), in the order they finished; empty for a job that had none.
        cursors: its saved cursors likewise: ``name``, ``value``, ``saved_at``.
    """

    id: int
    tube: str
    group: str | None
    outcome: str
    ended_at: int
    worker: str | None
    host: str | None
    pid: int | None
    by: str | None
    ran: float | None
    attempts: int
    created_at: int
    unique_key: str | None
    body: bytes
    result: bytes | None
    steps: list[dict[str, Any]] = field(default_factory=list)
    cursors: list[dict[str, Any]] = field(default_factory=list)

    @classmethod
    def from_row(cls, row: tuple[Any, ...]) -> Finished:
        """From a ``finished_job`` or ``list_finished`` row."""
        (job_id, tube, group, outcome, ended_at, worker, actor, ran, attempts, created_at,
         unique_key, body, steps, result, host, pid) = row
        done, cursors = recorded_as_dicts(steps)
        return cls(int(job_id), tube, group, outcome, int(ended_at), worker, host,
                   None if pid is None else int(pid), actor,
                   None if ran is None else max(0, ran) / 1000, int(attempts),
                   int(created_at), unique_key, bytes(body),
                   None if result is None else bytes(result), done, cursors)

    def describe(self) -> str:
        """One line: ``done 2026-12-05 14:02:11 UTC after 3 attempts, 1.2 s``,
        ``cancelled 2026-12-05 14:02:11 UTC by the dashboard``."""
        when = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(self.ended_at / 1000))
        words = [self.outcome, when]
        if self.by is not None:
            words.append("by the dashboard" if self.by == "dashboard" else f"by {self.by}")
        if self.attempts:
            words.append(f"after {self.attempts} attempt{'s' if self.attempts != 1 else ''}")
        line = " ".join(words)
        if self.ran is not None:
            line += f", {self.ran:.1f} s"
        return line

    def as_dict(self) -> dict[str, Any]:
        """The record as JSON-ready values (the body and result as text where they are
        UTF-8, else None: ``sqlq peek --json``)."""
        doc = {name: getattr(self, name) for name in self.__dataclass_fields__}
        for name in ("body", "result"):
            value = doc[name]
            if isinstance(value, bytes):
                try:
                    doc[name] = value.decode()
                except UnicodeDecodeError:
                    doc[name] = None
        return doc


@dataclass(frozen=True)
class Retention:
    """How long finished records are kept, as :meth:`sqlq.Queue.retention` sets it.

    Attributes:
        max_age: seconds a record is kept.
        max_count: records kept per tube and outcome (the newest).
    """

    max_age: float
    max_count: int


DEFAULT = Retention(DEFAULT_MAX_AGE_S, DEFAULT_MAX_COUNT)


def settings(rows: list[tuple[str, int | None, int | None]]) -> dict[str, Retention]:
    """The ``sqlq_retention`` rows as Retention per tube ('' every tube's), with the
    defaults filled in: a tube's unset value is every tube's, whose unset is built-in."""
    every = next(((a, c) for tube, a, c in rows if tube == ""), (None, None))
    base = Retention(DEFAULT.max_age if every[0] is None else every[0] / 1000,
                     DEFAULT.max_count if every[1] is None else int(every[1]))
    found = {"": base}
    for tube, age, count in rows:
        if tube:
            found[tube] = Retention(base.max_age if age is None else age / 1000,
                                    base.max_count if count is None else int(count))
    return found
