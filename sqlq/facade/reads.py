"""What a Queue reads: a job, a tube's counts, a result, the operators' reads.

The Queue's read-only verbs as docs/spec.md names them for applications, in a class of
their own (:class:`Reads`, which :class:`~sqlq.Queue` inherits) so that ``queue.py``
holds the verbs that change jobs. Each checks and shapes, then calls its read verb
(``sqlq/verbs/views.py``, ``q.views``, which also holds the reads only the dashboard,
``/metrics`` and ``sqlq top`` make); none takes the write lock (``result`` may wait for
one, on the reservation engine's notifier).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, NamedTuple

from ..backends import Events
from ..errors import JobNotFound, Timeout
from ..model import DEFAULT_TUBE, Job, check_job_id, job_id_in_range
from ..verbs.operations import ProgressWatch
from ..verbs.waiting import timeout_deadline

# The modules behind the reads load on first use, not with the Queue: a process that
# only puts (a `sqlq put` in a shell loop) does not pay for the dashboard's views.
if TYPE_CHECKING:
    from .. import control, observe, throughput
    from ..attempts import Attempt
    from ..backends import Backend
    from ..failures import FailedGroup
    from ..finished import Finished
    from ..horizon import Horizon
    from ..verbs.engine import Engine
    from ..verbs.operations import Operations
    from ..verbs.views import Views


class Links(NamedTuple):
    """A job's dependency edges as of now (:meth:`Reads.links`), ids in ascending order."""

    parents: list[int]  # the jobs it still waits for (put with after=; not yet gone)
    children: list[int]  # the jobs waiting for it


class Reads:
    """The Queue's read-only verbs (see :class:`~sqlq.Queue` for the class's docs)."""

    # Set by Queue.__init__.
    _backend: Backend
    _clock: Callable[[], int]
    engine: Engine
    #: The read verbs (sqlq/verbs/views.py): these methods' and the dashboard's.
    views: Views
    operations: Operations

    # -- results and subscriptions -----------------------------------------------------------

    def result(self, job_id: int, timeout: float | None = None, *,
               on_progress: Callable[[control.Progress, str], Any] | None = None) -> bytes:
        """Wait for a job's result and return it; it can be read again until it expires.

        Sleeps on the same notifier as :meth:`reserve`. ``timeout=None`` waits for
        ever, ``0`` only looks. ``on_progress(value, message)`` is called, in this
        thread, with the job's progress (``Job.progress``) when the call starts and each
        time it changes while it waits (a quick run of writes may show only the last).

        Raises:
            JobBuried: the job was buried (``.reason`` says why).
            Timeout: no result within ``timeout`` seconds.
            JobNotFound: no such id was issued, or its result expired, or the job was
                deleted without a result.

        Examples:
            >>> jid = q.put(b'{"n": 7}', tube="squares")
            >>> q.result(jid, timeout=60)  # a worker called job.complete(b"49")
            b'49'
        """
        check_job_id(job_id)
        deadline = timeout_deadline(timeout)
        from .. import control

        control.check_callback(on_progress)
        watch = None if on_progress is None else \
            ProgressWatch(self.operations, job_id, on_progress)

        def look(events: Events) -> bytes | None:
            found = self.operations.look_result(job_id)
            if found is None and watch is not None:
                watch.look()
            return found

        found = look(Events())
        if found is None and timeout != 0:
            found = self.engine.wait(look, deadline)
        if found is None:
            raise Timeout(f"job {job_id}: no result within {timeout:g} s")
        return found

    def subscriptions(self, topic: str | None = None) -> list[tuple[str, str]]:
        """The ``(topic, tube)`` subscriptions, sorted; only ``topic``'s when given."""

        return self.operations.subscriptions(topic)


    # -- observers ---------------------------------------------------------------------------

    def peek(self, job_id: int) -> Job | None:
        """The job as of now, or None if there is no such job.

        Examples:
            >>> job = q.peek(7)
            >>> job.state, job.bury_reason
            ('buried', 'corrupt image')
        """
        return self.views.peek(job_id)

    def peek_ready(self, tube: str = DEFAULT_TUBE) -> Job | None:
        """The job the next reserve on ``tube`` would get (pauses aside), or None.

        Raises:
            InvalidTube: ``tube`` is not a valid tube name.
        """
        return self.views.peek_state("ready", tube)

    def peek_delayed(self, tube: str = DEFAULT_TUBE) -> Job | None:
        """The delayed job due soonest in ``tube``, or None."""
        return self.views.peek_state("delayed", tube)

    def peek_buried(self, tube: str = DEFAULT_TUBE) -> Job | None:
        """The oldest buried job in ``tube``, or None."""
        return self.views.peek_state("buried", tube)

    def links(self, job_id: int) -> Links:
        """The job's parents it still waits for and the jobs waiting for it.

        A parent drops out of ``parents`` once it is gone (deleted or completed); a job
        that waits for nothing, and no job waits for, has two empty lists.

        Raises:
            JobNotFound: no such job is live.

        Examples:
            >>> a = q.put(b"a"); b = q.put(b"b", after=a)
            >>> q.links(b), q.links(a)
            (Links(parents=[1], children=[]), Links(parents=[], children=[2]))
        """
        found = self.views.links(job_id)
        if found is None:
            raise JobNotFound(f"job {job_id} not found")
        return Links(*found)

    def tubes(self) -> list[str]:
        """Tubes that hold jobs, are paused or subscribed to a topic, and ``default``, sorted.

        A tube a worker has drained drops out of this list (as beanstalkd forgets an
        unused tube), but its name stays valid everywhere: ``stats_tube`` reads zeros.
        """
        return self.views.tubes()

    def stats(self) -> dict[str, Any]:
        """Counts for the whole file, with beanstalkd's key names (see stats.py)."""
        return self.views.stats()

    def stats_tube(self, tube: str) -> dict[str, Any]:
        """One tube's counts with beanstalkd's keys; all zeros for a valid name with no jobs.

        ``total-jobs``, ``cmd-delete`` and ``cmd-pause-tube`` count the tube's puts, deletes
        and pauses since the database was created, by anyone. An empty tube is not
        an error: a monitor must not fail because a worker just drained the tube.

        Raises:
            InvalidTube: ``tube`` is not a valid tube name.

        Examples:
            >>> q.stats_tube("emails")["current-jobs-ready"]
            0
        """
        return self.views.stats_tube(tube)

    def stats_job(self, job_id: int) -> dict[str, Any]:
        """One job's record with beanstalkd's keys (times in whole seconds).

        Raises:
            JobNotFound: no such job.

        Examples:
            >>> q.stats_job(7)["state"]
            'delayed'
        """
        return self.views.stats_job(job_id)

    def finished(self, job_id: int) -> Finished | None:
        """The record of a job that ended, or None (no such job, still live, or its
        record pruned past the retention: :meth:`retention`).

        Every job that ends leaves one, written in the transaction that ends it:
        ``outcome`` is ``done`` (deleted by its holder after a run, with or without a
        result), ``deleted`` (by id) or ``cancelled``; with when, by which worker or
        whom, the run's time, the attempts, and the result while kept
        (:class:`sqlq.finished.Finished`). ``peek`` of such a job stays None.

        Examples:
            >>> q.finished(7).describe()
            'done 2026-12-05 14:02:11 UTC after 3 attempts, 1.2 s'
        """
        return self.views.finished(job_id)

    def attempts(self, job_id: int) -> list[Attempt]:
        """The failed runs ``sqlq work`` kept of a job, oldest first: when, which worker,
        how long, what became of the job, the error and its full traceback. The last
        10 are kept, each traceback up to 8 KiB; they go with the job. An unknown job
        (or one that never failed) has none.

        Examples:
            >>> [(a.attempt, a.outcome, a.message) for a in q.attempts(7)]
            [(1, 'retried', "KeyError: 'sku'"), (2, 'buried', "KeyError: 'sku'")]
            >>> print(q.attempts(7)[-1].traceback)
            Traceback (most recent call last):
              File "/srv/app/shop.py", line 12, in price
            ...
        """
        if not job_id_in_range(job_id):
            return []

        return self.operations.attempts(job_id)

    # -- operators' reads (the dashboard's own are ``q.views``'s alone) ------------------------

    def job_page(self, tube: str, state: str, *, after: tuple[int, int] | None = None,
                 limit: int = 50) -> list[observe.JobSummary]:
        """A page of a tube's jobs in one state (ready, delayed, reserved, buried, waiting), in
        the order that state is served (waiting: by id); pass the last row's ``cursor`` as
        ``after`` for the next."""
        return self.views.job_page(tube, state, after=after, limit=limit)

    def failed_groups(self, *, limit: int = 50, offset: int = 0) -> list[FailedGroup]:
        """Buried jobs across all tubes, grouped by how they failed, newest group first; a
        page of ``limit`` groups from ``offset``. A task's failures group by the newest
        kept attempt's error and where it was raised (``location``), their distinct
        messages listed in the group (``messages``); other burials by error and bury
        reason. Only the newest 10,000 buried jobs are grouped (``sqlq.failures.DEPTH``),
        from the buried index.

        Examples:
            >>> [(g.error, g.location, g.jobs) for g in q.failed_groups()]
            [('KeyError', 'app/tasks.py:41 in lookup', 412), ('', '', 3)]
        """
        return self.views.failed_groups(limit=limit, offset=offset)

    def failed_group_jobs(self, error: str, reason: str,
                          location: str = "") -> list[tuple[int, str]]:
        """(id, tube) of the buried jobs of one group of :meth:`failed_groups`, oldest first:
        what retrying or deleting the group acts on. Pass the group's ``error``, ``reason``
        and ``location`` (``*group.key``): with a location, every job that failed with that
        error there, whatever its reason; without, those with that reason.
        """
        return self.views.failed_group_jobs(error, reason, location)

    def workers(self) -> list[observe.Worker]:
        """The running ``sqlq work`` processes, idle ones too (host, pid, tubes, started,
        last heartbeat, at most ~5 s old, busy or not; the job it runs, named within about a
        second of its start; jobs done as of its last heartbeat), then any other process
        holding reservations (pid, host, jobs held, since
        when). A worker that stops leaves the list; one that dies (SIGKILL too) leaves
        it as soon as its owner registration is seen to end (sqlq/core/registry.py)."""
        return self.views.workers()

    def throughput(self, minutes: int = 24 * 60) -> list[throughput.Minute]:
        """Jobs put, deleted and buried per minute over the last ``minutes`` minutes (a day,
        ``throughput.KEEP_MINUTES``, is kept), oldest first, from the counters ``sqlq work``
        processes sample once a minute (sqlq/throughput.py); empty until two samples exist."""

        return self.operations.throughput(minutes)

    def horizon(self) -> Horizon:
        """What holds back the cleanup of deleted jobs, for gauges and warnings
        (:mod:`sqlq.horizon`): on PostgreSQL the oldest snapshot holding this database's
        xmin horizon (its kind, name and age) and the dead rows of sqlq's tables; on SQLite
        the -wal file's size and how long and how much a reader's snapshot has kept
        checkpoints from it (a passive checkpoint runs). Cheap, but not for every job:
        ``sqlq work`` looks every 30 s."""
        return self.views.horizon()

    def job_trace(self, job_id: int) -> str | None:
        """The W3C trace context the job's put stored under a recording OpenTelemetry span
        (``traceparent``, then a newline and ``tracestate`` if any: what a reserve gives as
        ``Job.trace``, which a peek leaves None); None for a job put untraced or gone.
        Every run of the job is a span of that trace (docs/tracing.md).

        Examples:
            >>> q.job_trace(7)
            '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01'
        """
        return self.views.job_trace(job_id)
