"""Read-only views of the file for people and monitors: the dashboard and ``/metrics``.

Everything here is a read (no write lock is ever taken, so a dashboard left open
never slows a producer or a worker) and answers from indexes, in time that grows
with what is shown, not with the jobs in the file: the overview of a file of a
million jobs is one walk of each tube's partial indexes, a page of jobs is one
keyset range probe. Jobs waiting for parents (``put(after=)``) are in no state index:
they are counted and listed through the edges naming them as child (``sqlq_edges_child``),
in time that grows with the waiting jobs. The reads are verbs (``sqlq/verbs/views.py``,
``q.views``), each one storage call (``backends/store/``); what is here shapes their rows
into these records, without the database.

Counters that outlive jobs: puts are the ids ever handed out, deletes are puts
minus the jobs alive in the same snapshot, and buries, kicks and timeouts per tube
are kept by a trigger in the database (SQLite migration 0005, PostgreSQL 0002).
The histograms of waits and runs are what ``sqlq work`` processes added (see
histograms.py; SQLite migration 0006, PostgreSQL 0004).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .model import STATE_NAMES, JobRow

if TYPE_CHECKING:
    from .core.registry import Registered

#: A body search looks at this many of the most recent job ids, at most: bodies have no
#: index, and a search must stay fast on a file of millions of jobs.
SEARCH_DEPTH = 100_000
MAX_PAGE = 500


@dataclass(frozen=True)
class TubeSummary:
    """One tube's jobs by state as of ``Overview.at`` (ready includes due delayed jobs and
    expired reservations, as in ``stats``; waiting: jobs put with ``after=`` whose parents
    are not all gone)."""

    name: str
    ready: int
    urgent: int
    reserved: int
    delayed: int
    buried: int
    paused_until: int | None  # ms, while paused
    oldest_ready_at: int | None  # ms: created_at of the oldest ready job
    buries_total: int = 0
    kicks_total: int = 0
    timeouts_total: int = 0
    waiting: int = 0

    @property
    def live(self) -> int:
        return self.ready + self.reserved + self.delayed + self.buried + self.waiting


@dataclass(frozen=True)
class Overview:
    """Every tube, and the file's counters, from one read snapshot."""

    at: int  # ms, the clock of the snapshot
    tubes: list[TubeSummary]
    puts_total: int  # every job ever put into the file (ids handed out)

    @property
    def live(self) -> int:
        return sum(t.live for t in self.tubes)

    @property
    def deletes_total(self) -> int:
        """Jobs deleted or completed since the file was created (puts minus live jobs)."""
        return max(self.puts_total - self.live, 0)


@dataclass(frozen=True)
class JobSummary:
    """A row of a job list: the job as stored, with only the first bytes of its body
    (``job.body``), and the body's full size."""

    job: JobRow
    body_size: int

    @property
    def id(self) -> int:
        return self.job.id

    @property
    def state(self) -> str:
        """The stored state's name (a due delayed job still reads "delayed" here)."""
        return STATE_NAMES[self.job.state]

    @property
    def cursor(self) -> tuple[int, int]:
        """(sort key, id): where the next page of this job's state starts."""
        key = {"ready": self.job.priority, "delayed": self.job.delay_until,
               "reserved": self.job.reserved_until}.get(self.state, 0)
        return (key or 0, self.job.id)


@dataclass(frozen=True)
class Worker:
    """A running ``sqlq work`` process (registered, idle or not: sqlq/core/registry.py), or
    another process holding reservations (reserving registers it with the backend)."""

    token: str | None  # None: reservations made detached (``sqlq reserve``)
    pid: int | None
    host: str
    jobs: int  # reservations held now
    since: int | None  # ms: when its oldest current reservation began
    tubes: list[str]  # a registered worker's watched tubes, else those it holds jobs of
    alive: bool
    registered: bool = False  # a sqlq work process in the workers registry
    started_at: int | None = None  # ms, registered workers only (as the three below)
    seen_at: int | None = None  # ms: its last heartbeat (every 5 s)
    job_id: int | None = None  # the job it runs as of its last heartbeat; None: idle
    jobs_done: int = 0  # runs it ended, as of its last heartbeat

    @property
    def busy(self) -> bool:
        """Running a job: a registered worker whose row names one (written within about a
        second of its start, sqlq/work/presence.py), or another process holding
        reservations (it holds them to run them)."""
        return self.job_id is not None if self.registered else self.jobs > 0


@dataclass(frozen=True)
class PeriodicSlot:
    """A periodic task's last enqueued slot (the schedule itself lives in the worker's code)."""

    name: str
    last_slot: int
    enqueued_at: int


def summary(now: int, name: str, counts: tuple[Any, ...],
            counters: tuple[int, int, int] | None, waiting: int) -> TubeSummary:
    """One tube's summary from its ``tube_counts`` row, its (buries, kicks, timeouts) and
    its waiting jobs, as of ``now``."""
    ready, urgent, reserved, delayed, buried, oldest, due_since, paused = counts
    starts = [t for t in (oldest, due_since) if t is not None]
    return TubeSummary(name, ready, urgent, reserved, delayed, buried,
                       paused if paused is not None and paused > now else None,
                       min(starts) if starts else None, *(counters or (0, 0, 0)),
                       waiting=waiting)


def overview_of(now: int, read: tuple[Any, ...]) -> Overview:
    """The overview from ``Store.overview``'s answer, as of ``now``."""
    counters, waiting, tubes, total = read
    return Overview(now, [summary(now, name, counts, counters.get(name), waiting.get(name, 0))
                          for name, counts in tubes], total)


def page_limit(limit: int) -> int:
    """A page's size, 1 to :data:`MAX_PAGE`."""
    return max(1, min(int(limit), MAX_PAGE))


def job_summaries(rows: Sequence[tuple[Any, ...]]) -> list[JobSummary]:
    """A list query's rows (select_job's columns, the body cut short, then the body's
    size), each job once (an exact match of a search is also found by its scan)."""
    unique = {row[0]: row for row in rows}
    return [JobSummary(JobRow(*row[:-1]), row[-1]) for row in unique.values()]


def workers_of(rows: Sequence[tuple[Any, ...]], registered: Sequence[Registered],
               dead: set[str], owners: dict[str, tuple[str, int | None]]) -> list[Worker]:
    """The live registered workers (oldest first), then the other processes holding
    reservations: from ``owner_reservations``' rows, the ``dead`` tokens among the latter
    and the (host, pid) of each."""
    held = {r[0]: (int(r[1]), r[2]) for r in rows}
    found = []
    for w in registered:
        jobs, since = held.pop(w.token, (0, None))
        found.append(Worker(w.token, w.pid, w.host, jobs, since, w.tubes, True, True,
                            w.started_at, w.seen_at, w.job_id, w.jobs_done))
    for token, count, since, tubes in rows:
        if token in held:
            host, pid = owners.get(token, ("", None)) if token is not None else ("", None)
            found.append(Worker(token, pid, host, int(count), since,
                                sorted(str(tubes).split(",")), token not in dead))
    return found
