"""Read-only views of the file for people and monitors: the dashboard and ``/metrics``.

Everything here is a read (no write lock is ever taken, so a dashboard left open
never slows a producer or a worker) and answers from indexes, in time that grows
with what is shown, not with the jobs in the file: the overview of a file of a
million jobs is one walk of each tube's partial indexes, a page of jobs is one
keyset range probe. Jobs waiting for parents (``put(after=)``) are in no state index:
they are counted and listed through the edges naming them as child (``sqlq_edges_child``),
in time that grows with the waiting jobs. The ``Queue`` methods of the same names are the
public entry points; the dashboard uses nothing else, so another storage backend only
has to provide these reads.

Counters that outlive jobs: puts are the ids ever handed out, deletes are puts
minus the jobs alive in the same snapshot, and buries, kicks and timeouts per tube
are kept by a trigger in the database (SQLite migration 0005, PostgreSQL 0002).
The histograms of waits and runs are what ``sqlq work`` processes added (see
histograms.py; SQLite migration 0006, PostgreSQL 0004).

Every function takes the backend and the time (``now``, ms): the Queue methods of
the same names pass its own.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from . import registry
from .backends import Backend
from .backends.base import Conn
from .histograms import Histogram, fold
from .model import DEFAULT_TUBE, STATE_NAMES, JobRow, check_tube

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
    """A running ``sqlq work`` process (registered, idle or not: sqlq/registry.py), or
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


def _summary(backend: Backend, c: Conn, now: int, tube: str,
             counters: dict[str, tuple[int, int, int]], waiting: dict[str, int]) -> TubeSummary:
    ready, urgent, reserved, delayed, buried, oldest, due_since, paused = \
        backend.store.views.tube_counts(c, now, tube)
    starts = [t for t in (oldest, due_since) if t is not None]
    return TubeSummary(tube, ready, urgent, reserved, delayed, buried,
                       paused if paused is not None and paused > now else None,
                       min(starts) if starts else None, *counters.get(tube, (0, 0, 0)),
                       waiting=waiting.get(tube, 0))


def overview(backend: Backend, now: int) -> Overview:
    """Every tube's counts and the database's counters, in one read (writers go on
    meanwhile)."""
    store = backend.store

    def read(c: Conn) -> Overview:
        counters = store.views.event_counters(c)
        waiting = store.deps.count_waiting(c, None)  # one walk of the edges for every tube
        # Known tubes stay listed at zero when drained: a busy tube whose workers keep
        # up must not vanish, nor its /metrics series go stale instead of reading 0.
        names = sorted(set(store.views.tube_names(c, now)) | set(store.views.known_tubes(c))
                       | set(waiting) | {DEFAULT_TUBE})
        return Overview(now, [_summary(backend, c, now, name, counters, waiting)
                              for name in names], store.jobs.total_jobs(c))

    return backend.read(read)


def tube(backend: Backend, now: int, name: str) -> TubeSummary:
    """One tube's summary (a tube that does not exist reads as empty)."""
    check_tube(name)
    store = backend.store
    return backend.read(lambda c: _summary(backend, c, now, name, store.views.event_counters(c),
                                           store.deps.count_waiting(c, name)))


def _job(row: tuple[Any, ...]) -> JobSummary:
    """A list query's row: select_job's columns (body cut short), then the body's size."""
    return JobSummary(JobRow(*row[:-1]), row[-1])


def jobs(backend: Backend, tube_name: str, state: str, after: tuple[int, int] | None,
         limit: int) -> list[JobSummary]:
    """A page of ``tube_name``'s jobs in ``state``, in that state's order (ready: as reserve
    takes them; delayed: due first; reserved: TTR ending first; buried and waiting: oldest
    first),
    starting after the job whose ``cursor`` is ``after``."""
    check_tube(tube_name)
    limit = max(1, min(int(limit), MAX_PAGE))
    key, after_id = after if after is not None else (-(2**62), 0)
    rows = backend.read(
        lambda c: backend.store.views.list_jobs(c, tube_name, state, key, after_id, limit))
    return [_job(r) for r in rows]


def search(backend: Backend, now: int, tube_name: str, text: str,
           limit: int) -> list[JobSummary]:
    """Jobs of ``tube_name`` whose id, unique key or body contains ``text``, newest first,
    among the last :data:`SEARCH_DEPTH` ids put into the file."""
    check_tube(tube_name)
    limit = max(1, min(int(limit), MAX_PAGE))
    store = backend.store
    as_id = int(text) if text.isascii() and text.isdigit() and int(text) < 2**63 else None

    def read(c: Conn) -> list[tuple[Any, ...]]:
        # An exact id or unique key is found at any age, through its index.
        exact = [store.jobs.select_job(c, now, as_id)] if as_id is not None else []
        key_id = store.jobs.unique_job_id(c, tube_name, text)
        exact.append(store.jobs.select_job(c, now, key_id) if key_id is not None else None)
        found = [(*row._replace(body=row.body[:160]), len(row.body)) for row in exact
                 if row is not None and row.tube == tube_name]
        min_id = store.jobs.total_jobs(c) - SEARCH_DEPTH
        return found + store.views.search_jobs(c, tube_name, text, min_id, limit)

    rows = backend.read(read)
    unique = {row[0]: row for row in rows}  # an exact match is also found by the scan
    return [_job(r) for r in list(unique.values())[:limit]]


def workers(backend: Backend, now: int) -> list[Worker]:
    """The running ``sqlq work`` processes (idle ones too), oldest first, then the other
    processes holding live reservations, with the jobs each holds."""
    rows = backend.read(lambda c: backend.store.workers.owner_reservations(c, now))
    held = {r[0]: (int(r[1]), r[2]) for r in rows}
    found = []
    for w in registry.live(backend):
        jobs, since = held.pop(w.token, (0, None))
        found.append(Worker(w.token, w.pid, w.host, jobs, since, w.tubes, True, True,
                            w.started_at, w.seen_at, w.job_id, w.jobs_done))
    others = [r for r in rows if r[0] in held]
    dead = set(backend.dead_owners([r[0] for r in others if r[0] is not None]))
    for token, count, since, tubes in others:
        host, pid = backend.owner_info(token) if token is not None else ("", None)
        found.append(Worker(token, pid, host, int(count), since,
                            sorted(str(tubes).split(",")), token not in dead))
    return found


def periodic(backend: Backend) -> list[PeriodicSlot]:
    """Every periodic task that ever enqueued a slot, by name."""
    return [PeriodicSlot(*row) for row in backend.read(backend.store.history.list_periodic)]


def result(backend: Backend, now: int, job_id: int) -> bytes | None:
    """The kept result of a completed job, or None (not completed, expired, or none)."""
    kept, _, _ = backend.read(lambda c: backend.store.results.result_outcome(c, now, job_id))
    return None if kept is None else bytes(kept)


def trace(backend: Backend, job_id: int) -> str | None:
    """The W3C trace context the job's put stored (traceparent, a newline, tracestate)."""
    return backend.read(lambda c: backend.store.views.job_trace(c, job_id), single=True)


def durations(backend: Backend) -> list[Histogram]:
    """The wait and run histograms of every tube, cumulated (one read)."""
    return fold(backend.read(backend.store.history.durations))
