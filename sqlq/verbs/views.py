"""The read verbs: what people and monitors read, each defined once.

Every read is a :class:`~sqlq.verbs.dispatch.Verb` record (a READ transaction, no
span) and a method of :class:`Views` calling the
one :class:`~sqlq.verbs.dispatch.Dispatcher` with one storage call: a noun's method
(``store.views``, ``store.history``...) or, where a read spans nouns (an overview,
a job's record), the ``Store`` holder's. What the rows become (``Overview``, a
``stats_tube`` document, failed groups) is shaped without the database, by
``observe.py``, ``stats.py`` and ``failures.py``, which load on first use: a process
that only puts does not pay for the dashboard's views.

``q.views`` (one per Queue) is what the dashboard, ``/metrics``, ``sqlq top`` and
``sqlq serve``'s stats call. The application's Queue keeps the reads docs/spec.md
names (``peek*``, ``stats*``, ``tubes``, ``links``, ``failed_groups``, ``workers``,
``job_trace``, ``horizon``, ``job_page``...), each calling the same verb here.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..model import DEFAULT_TUBE, check_job_id, check_tube, job_id_in_range
from .dispatch import READ, Dispatcher, Verb

if TYPE_CHECKING:
    from ..backends.store import Store
    from ..failures import FailedGroup
    from ..finished import Finished
    from ..histograms import Histogram
    from ..horizon import Horizon
    from ..model import Job, JobRow
    from ..observe import JobSummary, Overview, PeriodicSlot, TubeSummary, Worker

# -- the records, in the order of the methods below ------------------------------------------


def _read(name: str, *, single: bool = False, timed: bool = True) -> Verb:
    """A read verb's record: a READ transaction and no span (a dashboard or a /metrics
    scrape every few seconds is no operation on jobs to trace)."""
    return Verb(name, None, READ, single=single, timed=timed, span=False)


PEEK = _read("peek")
PEEK_STATE = _read("peek_state")
LINKS = _read("links", timed=False)
TUBES = _read("tubes")
STATS = _read("stats")
STATS_TUBE = _read("stats_tube")
STATS_JOB = _read("stats_job")
STEPS = _read("steps", single=True, timed=False)
NEXT_CHANGE = _read("next_change")
CHANGE_TOKEN = _read("change_token", single=True, timed=False)
OVERVIEW = _read("overview")
TUBE_SUMMARY = _read("tube_summary")
JOB_PAGE = _read("job_page", timed=False)
SEARCH = _read("search")
WORKERS = _read("workers")
PERIODIC_SLOTS = _read("periodic_slots", timed=False)
KEPT_RESULT = _read("kept_result")
JOB_TRACE = _read("job_trace", single=True, timed=False)
DURATIONS = _read("duration_histograms", timed=False)
FAILED_GROUPS = _read("failed_groups", timed=False)
FAILED_GROUP_JOBS = _read("failed_group_jobs", timed=False)
FINISHED = _read("finished", single=True)
FINISHED_PAGE = _read("finished_page", timed=False)
SEARCH_FINISHED = _read("search_finished", timed=False)
TUBE_GROUPS = _read("tube_groups", timed=False)

#: Every record, for tests and docs: one name, one meaning.
READS = (PEEK, PEEK_STATE, LINKS, TUBES, STATS, STATS_TUBE, STATS_JOB, STEPS, NEXT_CHANGE,
         CHANGE_TOKEN, OVERVIEW, TUBE_SUMMARY, JOB_PAGE, SEARCH, WORKERS, PERIODIC_SLOTS,
         KEPT_RESULT, JOB_TRACE, DURATIONS, FAILED_GROUPS, FAILED_GROUP_JOBS, FINISHED,
         FINISHED_PAGE, SEARCH_FINISHED, TUBE_GROUPS)


class Views:
    """The read verbs of one Queue's backend (``q.views``; see the module docstring)."""

    __slots__ = ("dispatch", "store", "_job_from_row", "_max_job_size")

    def __init__(self, dispatch: Dispatcher, store: Store[Any],
                 job_from_row: Callable[[JobRow], Job], max_job_size: int) -> None:
        self.dispatch = dispatch
        self.store = store
        self._job_from_row = job_from_row
        self._max_job_size = max_job_size

    # -- jobs and tubes, as applications read them (the Queue's spec'd reads call these) -----

    def peek(self, job_id: int) -> Job | None:
        """The job as of now, or None if there is no such job (``Queue.peek``)."""
        if not job_id_in_range(job_id):
            return None
        row = self.dispatch.run(PEEK, self.store.jobs.select_job, job_id)
        return None if row is None else self._job_from_row(row)

    def peek_state(self, which: str, tube: str) -> Job | None:
        """The job ``Queue.peek_ready``/``_delayed``/``_buried`` (``which``) shows, or None."""
        check_tube(tube)
        row = self.dispatch.run(PEEK_STATE, self.store.peek, which, tube)
        return None if row is None else self._job_from_row(row)

    def links(self, job_id: int) -> tuple[list[int], list[int]] | None:
        """(parents it still waits for, children waiting for it) of a live job, else None."""
        check_job_id(job_id)
        found: tuple[list[int], list[int]] | None = self.dispatch.run(
            LINKS, self.store.deps.links, job_id)
        return found

    def tubes(self) -> list[str]:
        """Tubes that hold jobs, are paused or subscribed to a topic, and ``default``, sorted."""
        found = self.dispatch.run(TUBES, self.store.views.list_tubes)
        return sorted(set(found) | {DEFAULT_TUBE})

    def stats(self) -> dict[str, Any]:
        """The whole database's counts with beanstalkd's keys (``Queue.stats``)."""
        from .. import stats

        backend = self.dispatch.backend
        return stats.file_doc(self.dispatch.run(STATS, self.store.file_counts),
                              self._max_job_size, backend.durability, backend.location)

    def stats_tube(self, tube: str) -> dict[str, Any]:
        """One tube's counts with beanstalkd's keys, zeros for a tube without jobs
        (``Queue.stats_tube``)."""
        from .. import stats

        return stats.tube_doc(self.tube_record(tube), self.dispatch.clock(), tube)

    def tube_record(self, tube: str) -> tuple[Any, ...]:
        """What ``stats_tube`` is made of (``Store.tube_record``), for ``sqlq serve``,
        which keeps it while the file does not change (its pause's time left runs on)."""
        check_tube(tube)
        return tuple(self.dispatch.run(STATS_TUBE, self.store.tube_record, tube))

    def stats_job(self, job_id: int) -> dict[str, Any]:
        """One job's record with beanstalkd's keys and sqlq's (``Queue.stats_job``).

        Raises:
            JobNotFound: no such job.
        """
        check_job_id(job_id)
        from .. import stats

        now = self.dispatch.clock()
        return stats.job_doc(self.dispatch.run(STATS_JOB, self.store.job_record, job_id), now,
                             job_id)

    def steps(self, job_id: int) -> list[tuple[int, str, str, int]]:
        """A job's steps and cursors: (kind, name, value as JSON, when in ms), steps in
        the order they finished (``StepStore.load``); none for an unknown job."""
        if not job_id_in_range(job_id):
            return []
        rows: list[tuple[int, str, str, int]] = self.dispatch.run(STEPS, self.store.steps.load,
                                                                  job_id)
        return rows

    def next_change(self) -> int | None:
        """When (ms) counts as of now change without a write: a delayed job comes due, a
        TTR runs out, a pause ends; None if nothing is timed (``sqlq serve``'s cache)."""
        due: int | None = self.dispatch.run(NEXT_CHANGE, self.store.next_change)
        return due

    def change_token(self) -> tuple[Any, ...]:
        """A value that differs whenever what this Queue reads may have changed (another
        connection committed, or this one wrote) since: ``sqlq serve``'s cache key."""
        token: tuple[Any, ...] = self.dispatch.run(CHANGE_TOKEN, self.store.jobs.change_token)
        return token

    # -- the dashboard's and /metrics' -------------------------------------------------------

    def overview(self) -> Overview:
        """Every tube's counts as of now and the file's counters, from one read snapshot;
        fast on a file of millions of jobs (indexes only)."""
        from .. import observe

        now = self.dispatch.clock()
        return observe.overview_of(now, self.dispatch.run(OVERVIEW, self.store.overview,
                                                          (DEFAULT_TUBE,)))

    def tube_summary(self, tube: str) -> TubeSummary:
        """One tube's counts as of now (an unknown tube reads as empty)."""
        check_tube(tube)
        from .. import observe

        now = self.dispatch.clock()
        return observe.summary(now, tube, *self.dispatch.run(TUBE_SUMMARY,
                                                             self.store.tube_overview, tube))

    def job_page(self, tube: str, state: str, *, after: tuple[int, int] | None = None,
                 limit: int = 50) -> list[JobSummary]:
        """A page of a tube's jobs in one state (ready, delayed, reserved, buried, waiting),
        in the order that state is served (waiting: by id); pass the last row's ``cursor``
        as ``after`` for the next."""
        check_tube(tube)
        from .. import observe

        key, after_id = after if after is not None else (-(2**62), 0)
        return observe.job_summaries(self.dispatch.run(
            JOB_PAGE, self.store.views.list_jobs, tube, state, key, after_id,
            observe.page_limit(limit)))

    def search(self, tube: str, text: str, *, limit: int = 50) -> list[JobSummary]:
        """Recent jobs of a tube whose id, unique key or body contains ``text``, newest
        first, among the last ``observe.SEARCH_DEPTH`` ids put (an exact id or key at any age)."""
        check_tube(tube)
        from .. import observe

        limit = observe.page_limit(limit)
        rows = self.dispatch.run(SEARCH, self.store.search, tube, text,
                                 observe.SEARCH_DEPTH, limit)
        return observe.job_summaries(rows)[:limit]

    def workers(self) -> list[Worker]:
        """The running ``sqlq work`` processes, idle ones too, oldest first, then any other
        process holding reservations (``Queue.workers``)."""
        from .. import observe
        from ..core.registry import Registered, alive

        rows, registered = self.dispatch.run(WORKERS, self.store.presence)
        backend = self.dispatch.backend
        workers = [Registered.from_row(r) for r in registered]
        live = alive(workers, backend.live_owners([w.token for w in workers]) if workers else ())
        tokens = {r.token for r in live}
        others = [r[0] for r in rows if r[0] is not None and r[0] not in tokens]
        dead = set(backend.dead_owners(others)) if others else set()
        owners = {token: backend.owner_info(token) for token in others}
        return observe.workers_of(rows, live, dead, owners)

    def periodic_slots(self) -> list[PeriodicSlot]:
        """The last slot each periodic task enqueued, by name."""
        from ..observe import PeriodicSlot

        return [PeriodicSlot(*row)
                for row in self.dispatch.run(PERIODIC_SLOTS, self.store.history.list_periodic)]

    def kept_result(self, job_id: int) -> bytes | None:
        """A completed job's result if it is still kept, else None; never waits."""
        if not job_id_in_range(job_id):
            return None
        kept, _, _ = self.dispatch.run(KEPT_RESULT, self.store.results.result_outcome, job_id)
        return None if kept is None else bytes(kept)

    def job_trace(self, job_id: int) -> str | None:
        """The W3C trace context the job's put stored; None for a job untraced or gone
        (``Queue.job_trace``)."""
        if not job_id_in_range(job_id):
            return None
        trace: str | None = self.dispatch.run(JOB_TRACE, self.store.views.job_trace, job_id)
        return trace

    def duration_histograms(self) -> list[Histogram]:
        """Per tube, the histograms of how long jobs waited before their first reservation
        (``wait``) and how long runs took (``run``), as ``sqlq work`` workers recorded them
        (cumulated)."""
        from ..histograms import fold

        return fold(self.dispatch.run(DURATIONS, self.store.history.durations))

    def failed_groups(self, *, limit: int = 50, offset: int = 0) -> list[FailedGroup]:
        """Buried jobs across all tubes grouped by how they failed, newest group first
        (``Queue.failed_groups``; sqlq/failures.py)."""
        from .. import failures
        from ..model import MESSAGE_LIMIT

        failures.check_page(limit, offset)
        rows = self.dispatch.run(FAILED_GROUPS, self.store.history.failed_groups,
                                 failures.DEPTH, MESSAGE_LIMIT)
        return failures.fold(rows, limit, offset)

    def failed_group_jobs(self, error: str, reason: str,
                          location: str = "") -> list[tuple[int, str]]:
        """(id, tube) of the buried jobs of one group of :meth:`failed_groups`, oldest
        first (``Queue.failed_group_jobs``)."""
        from ..failures import DEPTH
        from ..model import MESSAGE_LIMIT

        found: list[tuple[int, str]] = self.dispatch.run(
            FAILED_GROUP_JOBS, self.store.history.failed_group_ids, DEPTH, MESSAGE_LIMIT,
            error, location, reason[:MESSAGE_LIMIT])
        return found

    def finished(self, job_id: int) -> Finished | None:
        """The record of a job that ended (``Queue.finished``), or None: no such job,
        still live, or its record pruned."""
        from ..finished import Finished

        if not job_id_in_range(job_id):
            return None
        row = self.dispatch.run(FINISHED, self.store.finished.record, job_id)
        return None if row is None else Finished.from_row(row)

    def finished_page(self, tube: str, outcome: str, *, after: tuple[int, int] | None = None,
                      limit: int = 50) -> list[Finished]:
        """A page of a tube's records of one outcome, newest first, after the key
        ``(ended_at, id)`` of the last record of the page before (the dashboard's Done,
        Cancelled and Deleted lists)."""
        from ..finished import Finished, check_outcome

        check_tube(tube)
        check_outcome(outcome)
        at, last = after if after is not None else (2**62, 0)
        rows = self.dispatch.run(FINISHED_PAGE, self.store.finished.page, tube, outcome, at,
                                 last, limit)
        return [Finished.from_row(r) for r in rows]

    def search_finished(self, tube: str, outcome: str, text: str, *, limit: int = 50
                        ) -> list[Finished]:
        """A tube's records of one outcome whose id, unique key or body's head holds
        ``text``, newest first, among its newest ``finished.SEARCH_DEPTH``."""
        from ..finished import SEARCH_DEPTH, Finished, check_outcome

        check_tube(tube)
        check_outcome(outcome)
        rows = self.dispatch.run(SEARCH_FINISHED, self.store.finished.search, tube, outcome,
                                 text, SEARCH_DEPTH, limit)
        return [Finished.from_row(r) for r in rows]

    def tube_groups(self, tube: str, *, limit: int = 10) -> list[tuple[str, int, int]]:
        """The groups of ``tube`` (``put(group=)``) with the most ready and reserved jobs:
        (group, ready, reserved), the busiest first, at most ``limit`` (the dashboard's)."""
        check_tube(tube)
        groups: list[tuple[str, int, int]] = self.dispatch.run(
            TUBE_GROUPS, self.store.groups.busiest, self.dispatch.clock(), tube, limit)
        return groups

    def horizon(self) -> Horizon:
        """What holds back the cleanup of deleted jobs (``Queue.horizon``): the backend's
        own look (on SQLite it runs a passive checkpoint), not a statement of the store."""
        return self.dispatch.backend.horizon(self.dispatch.clock())
