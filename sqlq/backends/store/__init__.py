"""The verbs every backend runs on its own connection: the Queue's whole use of SQL,
held by noun.

A backend's ``queries.sql`` holds one named statement per verb, in its dialect; the
noun stores here run them. Most take their parameters by name, in a dict (``:name``
in SQLite, ``%(name)s`` in PostgreSQL). The hottest take a positional tuple instead,
which binds faster (``?``/``?1`` in SQLite, ``%s`` in PostgreSQL), in the order
their description in ``queries.sql`` lists: the puts' inserts, the one-tube claim,
the worker's ``delete_leased_job``.

:class:`Store` holds one object per noun: ``jobs``, ``claims``, ``deps``, ``limits``,
``control``, ``results``, ``steps``, ``topics``, ``history``, ``workers``, ``views``,
``copying``, ``finished``.
Each is a plain class given the dialect's statements (``Q``) and the sibling nouns it
calls (a delete-and-claim deletes through ``jobs``; a limited claim claims through
``claims``); none inherits from another. Where the dialects differ (how an insert
learns its id, how a claim folds in due jobs, how a list is passed) a backend subclasses
that noun (``sqlite/store.py``, ``postgres/store.py``) and its own Store builds it.

Every method takes an open connection inside the caller's transaction and the
time in ms (``now``), and either does its one thing or raises: JobNotFound when
no job matches, JobLost when a lease was given and is no longer live.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Generic

from ...errors import DatabaseError
from ..conn import ConnT
from .claims import ClaimStore
from .control import ControlStore
from .copying import COPIED, PAGED, CopyStore
from .deps import DependencyStore
from .finished import FinishedStore
from .groups import GroupStore
from .history import HistoryStore
from .jobs import JobStore
from .limits import LimitStore
from .results import ResultStore, TopicStore
from .steps import StepStore
from .views import ViewStore
from .workers import WorkerStore

#: How often a replace looks again when another producer changes the key's holder between
#: two of its statements (PostgreSQL; each look but the first follows another's commit).
REPLACE_TRIES = 10

if TYPE_CHECKING:
    from ...model import ClaimRow, JobRow, OnProgress
    from ...putting import Put

__all__ = ["ClaimStore", "ControlStore", "CopyStore", "DependencyStore", "FinishedStore",
           "GroupStore", "HistoryStore", "JobStore", "LimitStore", "ResultStore", "StepStore",
           "Store", "TopicStore", "ViewStore", "WorkerStore"]


class Store(Generic[ConnT]):
    """A backend's SQL verbs, one object per noun. The dialect gives the nouns it
    overrides; the others are built here, over the same statements."""

    def __init__(self, Q: dict[str, str], jobs: JobStore[ConnT], claims: ClaimStore[ConnT],
                 limits: LimitStore[ConnT], copying: CopyStore[ConnT]) -> None:
        #: The dialect's statements by name (queries.sql), for the backend's own upkeep.
        self.Q = Q
        self.jobs = jobs
        self.claims = claims
        self.limits = limits
        self.copying = copying
        self.deps = DependencyStore(Q, jobs)
        self.control = ControlStore(Q, jobs)
        self.results = ResultStore(Q, jobs)
        self.steps = StepStore(Q, jobs)
        self.topics = TopicStore(Q)
        self.history = HistoryStore(Q)
        self.workers = WorkerStore(Q)
        self.views = ViewStore(Q)
        self.finished = FinishedStore(Q)
        self.groups = GroupStore(Q)

    # -- verbs across nouns: each one call of the verb contract (sqlq/verbs/) ---------------

    def put(self, conn: ConnT, now: int, put: Put, bodies: Sequence[bytes]) -> list[int]:
        """Insert one job per body as ``put`` describes (:func:`sqlq.putting.describe_put`):
        the one call every put makes; their ids, in order (a unique key held: the holder's
        id, the job unchanged; ``put.replace``: the job it replaced or put, :meth:`replace`).
        The put's trace, if any, goes on each job it inserted or replaced."""
        jobs = self.jobs
        if put.replace:
            ids = [self.replace(conn, now, put, put.tube, body) for body in bodies]
            if put.trace is not None:
                jobs.set_trace(conn, ids, put.trace)
            return ids
        held = None
        if (put.trace is not None or put.group is not None) and put.unique_key is not None:
            held = jobs.unique_job_id(conn, put.tube, put.unique_key)
        if put.parents:
            ids = self.deps.insert_after(conn, now, put.tube, put.priority, put.delay_ms,
                                         put.ttr_ms, bodies, put.unique_key, put.parents)
        elif len(bodies) == 1:
            ids = [jobs.insert_job(conn, now, put.tube, put.priority, put.delay_ms,
                                   put.ttr_ms, bodies[0], put.unique_key)]
        else:
            ids = jobs.insert_jobs(conn, now, put.tube, put.priority, put.delay_ms,
                                   put.ttr_ms, bodies)
        if put.trace is not None and held is None and ids:
            jobs.set_trace(conn, ids, put.trace)
        if held is None and ids:
            self.grouped(conn, now, put.tube, put.group, ids)
        return ids

    def grouped(self, conn: ConnT, now: int, tube: str, group: str | None,
                ids: Sequence[int]) -> None:
        """Jobs just inserted into ``tube``: into ``group`` with their turns, or, without
        one, marked as the jobs without a group if the tube is grouped (groups.py)."""
        groups = self.groups
        if group is not None:
            groups.put_in_group(conn, tube, group, ids, self.jobs.ids_param)
        elif now >= groups.look_at:
            groups.plain_puts(conn, now, tube, ids, self.jobs.ids_param)

    def publish(self, conn: ConnT, now: int, put: Put, body: bytes) -> list[tuple[str, int]]:
        """One copy of body in each tube subscribed to the topic ``put.tube``, as ``put``
        says; (tube, id) in tube-name order (a tube holding a live job with the unique
        key gives that job's id, and that job keeps its own trace)."""
        jobs = self.jobs
        copies, fresh = [], []
        for tube in self.topics.topic_tubes(conn, put.tube):
            if put.replace:
                held, job_id = False, self.replace(conn, now, put, tube, body)
            else:
                held = put.trace is not None and put.unique_key is not None \
                    and jobs.unique_job_id(conn, tube, put.unique_key) is not None
                job_id = jobs.insert_job(conn, now, tube, put.priority, put.delay_ms,
                                         put.ttr_ms, body, put.unique_key)
            copies.append((tube, job_id))
            if put.trace is not None and not held:
                fresh.append(job_id)
        if put.trace is not None and fresh:
            jobs.set_trace(conn, fresh, put.trace)
        return copies

    def replace(self, conn: ConnT, now: int, put: Put, tube: str, body: bytes) -> int:
        """The job of a put with ``on_conflict="replace"`` in ``tube``; its id.

        The ready, delayed or waiting job holding the key takes the put's body, priority,
        ttr, delay (from now; a waiting job's from its release) and group in place. A reserved or
        buried holder is never changed: the key passes to a new job that waits for it as
        ``after=`` does (``deps.insert_after``), which later replaces then change. No
        holder: the job is put. Each step is one statement that re-checks under the row's
        lock; on PostgreSQL a holder that another producer puts or claims between two of
        them sends the loop round again (SQLite's write lock rules that out).
        """
        jobs = self.jobs
        key = put.unique_key or ""
        for _ in range(REPLACE_TRIES):
            job_id = jobs.replace_job(conn, now, tube, put, body, insert=False)
            if job_id is None and (holder := jobs.pass_key(conn, tube, key)) is not None:
                job_id = self.deps.insert_after(conn, now, tube, put.priority, put.delay_ms,
                                                put.ttr_ms, (body,), key, (holder,))[0]
            if job_id is None:
                job_id = jobs.replace_job(conn, now, tube, put, body, insert=True)
            if job_id is not None:
                # Its group is the put's too (None: none), with a turn from now: a
                # replaced job takes its place in its group's round as a new put would.
                self.grouped(conn, now, tube, put.group, (job_id,))
                return job_id
        raise DatabaseError(f"unique key {key!r} in tube {tube!r}: its job changed "
                            f"{REPLACE_TRIES} times during one replace; nothing put")

    def put_periodic(self, conn: ConnT, now: int, put: Put, body: bytes, name: str,
                     slot_ms: int) -> list[int]:
        """The job of periodic task ``name`` for the slot starting at ``slot_ms``, put as
        ``put`` says with the slot claimed in the same transaction: its id, or [] when
        that slot (or a later one) was claimed already (``Queue.enqueue_periodic``)."""
        if not self.history.claim_periodic_slot(conn, now, name, slot_ms):
            return []
        return self.put(conn, now, put, (body,))

    def copy_from(self, conn: ConnT, source: Store[Any], source_conn: Any, page: int,
                  progress: OnProgress | None = None) -> tuple[dict[str, int], int] | None:
        """Copy every job and all queue state from ``source`` (read on ``source_conn``,
        inside its snapshot) into this empty database: (rows copied by kind, the id
        counter it goes on from); None, writing nothing, when this one holds anything.
        Jobs, edges and results go ``page`` rows at a time (PAGED), so the copy holds one
        page whatever the size. ``progress(jobs copied, fraction)`` after each page of
        jobs: the fraction is of the id range, as jobs go in id order (a count would
        read the whole table once more)."""
        if self.views.count_everything(conn):
            return None
        total_jobs = source.jobs.total_jobs(source_conn)
        counts: dict[str, int] = {}
        first = None
        for kind in COPIED:
            counts[kind] = 0
            after = None
            keys = len(PAGED.get(kind, ()))
            while rows := source.copying.export_rows(source_conn, kind, after, page):
                self.copying.import_rows(conn, kind, rows)
                counts[kind] += len(rows)
                if not keys:
                    break
                after = rows[-1][:keys]
                if kind == "job" and progress is not None:
                    first = rows[0][0] if first is None else first
                    progress(counts[kind], (rows[-1][0] - first + 1) / (total_jobs - first + 1))
        self.copying.set_total_jobs(conn, total_jobs)
        return counts, total_jobs

    def settle_and_claim_limited(self, conn: ConnT, now: int, done: Sequence[tuple[int, int]],
                                 tubes: Any, owner: str | None, n: int
                                 ) -> tuple[list[tuple[int, int]], list[ClaimRow], bool]:
        """Delete the (id, lease) jobs of ``done`` and claim up to n within the tubes'
        limits (``LimitStore.claim_limited``): (the lost leases, the claim rows, whether
        any tube had limits). A lost lease claims nothing; one job's (reserve(delete=job))
        raises JobLost, undoing the whole transaction."""
        if len(done) == 1:
            self.jobs.delete(conn, now, done[0][0], done[0][1])
        elif done:
            lost = self.claims.delete_many(conn, now, done)
            if lost:
                return lost, [], True
        rows, limited = self.limits.claim_limited(conn, now, tubes, owner, n)
        return [], rows, limited

    def settle_and_claim_fair(self, conn: ConnT, now: int, done: Sequence[tuple[int, int]],
                              tubes: Any, tube: str, owner: str | None) -> ClaimRow | None:
        """Delete the (id, lease) job of ``done`` (JobLost undoes the whole transaction)
        and claim the grouped ``tube``'s next job in claim order, if it is still without
        limits or pause (``ClaimStore.claim_fair_alone``; groups.py)."""
        if done:
            self.jobs.delete(conn, now, done[0][0], done[0][1])
        return self.claims.claim_fair_alone(conn, now, tubes, tube, owner)

    def end_attempt(self, conn: ConnT, now: int, job_id: int, lease: int | None,
                    attempt: dict[str, Any], kept: int, delay_ms: int | None,
                    reason: str | None) -> None:
        """A failed run's end: the reserved job released to run again after ``delay_ms``
        (None: buried, with ``reason``), and the attempt kept (``HistoryStore.keep_attempt``,
        the job's last ``kept``)."""
        if delay_ms is None:
            self.jobs.bury(conn, now, job_id, lease, None, reason)
        else:
            self.jobs.release(conn, now, job_id, lease, None, delay_ms)
        self.history.keep_attempt(conn, attempt, kept)

    # -- reads across nouns: each one call of a read verb (sqlq/verbs/views.py) --------------

    def peek(self, conn: ConnT, now: int, which: str, tube: str) -> JobRow | None:
        """The job a peek of ``which`` state (ready, delayed, buried) in ``tube`` shows."""
        job_id = self.jobs.peek_id(conn, now, which, tube)
        return None if job_id is None else self.jobs.select_job(conn, now, job_id)

    def overview(self, conn: ConnT, now: int, always: Sequence[str]) -> tuple[Any, ...]:
        """Every tube's counts from one snapshot: (tube -> (buries, kicks, timeouts),
        tube -> jobs waiting, [(tube, ViewStore.tube_counts)], ids ever issued). Known
        tubes and ``always`` stay listed at zero when drained: a busy tube whose workers
        keep up must not vanish, nor its /metrics series go stale instead of reading 0."""
        views = self.views
        counters = views.event_counters(conn)
        waiting = self.deps.count_waiting(conn, None)  # one walk of the edges for every tube
        names = sorted(set(views.tube_names(conn, now)) | set(views.known_tubes(conn))
                       | set(waiting) | set(always))
        return (counters, waiting, [(name, views.tube_counts(conn, now, name)) for name in names],
                self.jobs.total_jobs(conn))

    def tube_overview(self, conn: ConnT, now: int, tube: str) -> tuple[Any, ...]:
        """One tube's part of :meth:`overview`: (its tube_counts, its (buries, kicks,
        timeouts) or None, its jobs waiting)."""
        counters = self.views.event_counters(conn).get(tube)
        return (self.views.tube_counts(conn, now, tube), counters,
                self.deps.count_waiting(conn, tube).get(tube, 0))

    def search(self, conn: ConnT, now: int, tube: str, text: str, depth: int,
               limit: int) -> list[tuple[Any, ...]]:
        """Jobs of ``tube`` whose id, unique key or body contains ``text`` (select_job's
        columns, the body cut to 160 bytes, then its size): an exact id or unique key at
        any age, through its index, then a scan of the last ``depth`` ids, newest first."""
        jobs = self.jobs
        as_id = int(text) if text.isascii() and text.isdigit() and int(text) < 2**63 else None
        exact = [jobs.select_job(conn, now, as_id)] if as_id is not None else []
        key_id = jobs.unique_job_id(conn, tube, text)
        exact.append(jobs.select_job(conn, now, key_id) if key_id is not None else None)
        found = [(*row._replace(body=row.body[:160]), len(row.body)) for row in exact
                 if row is not None and row.tube == tube]
        return found + self.views.search_jobs(conn, tube, text, jobs.total_jobs(conn) - depth,
                                              limit)

    def file_counts(self, conn: ConnT, now: int) -> tuple[Any, ...]:
        """The whole database's counts: (ViewStore.count_jobs of every tube, ids ever
        issued, tubes listed, topics)."""
        views = self.views
        return (views.count_jobs(conn, now, None), self.jobs.total_jobs(conn),
                views.list_tubes(conn, now), self.topics.count_topics(conn))

    def tube_record(self, conn: ConnT, now: int, tube: str) -> tuple[Any, ...]:
        """One tube's counters: its [ready, urgent, reserved, delayed, buried, waiting]
        (None: no jobs), its last pause (paused_until, pause_ms) or None, its (puts,
        pauses) ever, and its limits (list_limits' rows: none or one)."""
        views = self.views
        return (views.count_jobs(conn, now, tube).get(tube), self.limits.tube_pause(conn, tube),
                views.tube_totals(conn, tube), self.limits.list_limits(conn, tube))

    def job_record(self, conn: ConnT, now: int, job_id: int) -> tuple[Any, ...]:
        """One job's record: (its row or None, its last attempt, the parents it waits
        for, its progress, its steps and cursors)."""
        row = self.jobs.select_job(conn, now, job_id)
        steps = self.steps.load(conn, job_id) if row is not None else []
        return (row, self.history.last_attempt(conn, job_id),
                self.deps.waiting_on(conn, job_id), self.control.job_progress(conn, job_id),
                steps)

    def next_change(self, conn: ConnT, now: int) -> int | None:
        """The earliest time (ms) after ``now`` at which counts change without a write (a
        delayed job due, a TTR out, a pause over); None if nothing is timed."""
        names = self.views.tube_names(conn, now)
        claims = self.claims
        return claims.next_due(conn, now, claims.tubes_param(names)) if names else None

    def presence(self, conn: ConnT, now: int) -> tuple[Any, ...]:
        """(WorkerStore.owner_reservations, the workers registry's rows): who holds
        reservations and who registered as a worker."""
        workers = self.workers
        return workers.owner_reservations(conn, now), workers.list_workers(conn)
