"""The Queue: sqlq's Python API (docs/spec.md is the contract of every name).

The Queue checks arguments and shapes results. Reserving and waiting are the
reservation engine's (``verbs/engine.py``); every read and write goes to its backend
(``backends/``), which it never asks which one it is. Its producing verbs are in
``facade/puts.py``, its read-only ones in ``facade/reads.py`` and a tube's flow in
``facade/flow.py``, all inherited; this module holds its life, the reserves and the
verbs that change a job.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, ParamSpec, TypeVar, overload

from . import control
from .backends import Backend, open_backend
from .backends.base import Durability
from .core.durations import check_seconds, now_ms, seconds_to_ms
from .errors import Error
from .facade.flow import FlowControl
from .facade.puts import Puts, Transaction
from .facade.reads import Reads
from .model import (
    DEFAULT_MAX_JOB_SIZE,
    DEFAULT_PRIORITY,
    DEFAULT_TTR,
    DEFAULT_TUBE,
    MAX_JOB_ID,
    Job,
    check_batch_size,
    check_body,
    check_by,
    check_job_id,
    check_lease,
    check_priority,
    check_tube,
)
from .putting import describe_put
from .verbs import Dispatcher, Operations, Verbs, Views
from .verbs.engine import Engine
from .verbs.waiting import timeout_deadline

if TYPE_CHECKING:
    from .backup import Backup
    from .histograms import Tally
    from .model import OnProgress
    from .tasks.retry import Backoff
    from .tasks.task import Task

_P = ParamSpec("_P")
_R = TypeVar("_R")


class Queue(Puts, Reads, FlowControl):
    """A durable job queue in one SQLite file (or a PostgreSQL database), shared by any
    number of processes.

    Args:
        path: the database: a file path (created, mode 0600, WAL, if missing) or a
            ``postgresql://`` URL; default ``$SQLQ_DB`` or ``./sqlq.db``.
        durability: ``"full"`` fsyncs every put, delete and bury before it returns
            (survives power loss); ``"normal"`` survives any process crash but may
            lose the last commits on power loss, for about 3x the throughput.
        max_job_size: the largest body accepted, in bytes (default 1 MiB).
        result_ttl: seconds a job's result is kept (default 24 h).
        init: add sqlq's tables to an existing database of another application
            (or an empty file) instead of refusing it. A PostgreSQL database always
            gets its own ``sqlq`` tables created on first use.
        clock: a function returning the time in ms since the epoch (tests pass a fake).
        vfs: the name of a registered SQLite VFS to open the file with (the power-cut
            tests pass one that forgets unsynced writes); default: SQLite's own.
        driver: the SQLite library a file is opened through: ``"apsw"`` (the
            default: apsw's own, recent SQLite) or ``"sqlite3"`` (Python's module,
            the system's SQLite, 3.35 or newer). An application that uses
            ``sqlite3`` itself, e.g. with ``sqlq.put(conn)``, opens its Queues with
            ``driver="sqlite3"``: two SQLite libraries in one process ignore each
            other's locks, so sqlq refuses to mix them on one file.

    A Queue may be shared between threads: their calls take turns on one connection,
    and durable writes made at the same time (``put``, ``put_many``, ``delete``,
    ``bury``, ``complete``, ``publish``...) share one transaction and one commit
    (group commit), each returning once that commit is durable, with its own result
    or error. Create it after ``fork()``, not before.

    A PostgreSQL server need not be up when the Queue is made (a module that makes it at
    import): the first use connects, waiting as after a lost connection (up to a minute).

    Raises:
        SchemaError: the file belongs to another application (without ``init=True``)
            or was written by a newer sqlq; it is left untouched.
        DatabaseError: the file cannot be created, opened or written (a missing
            directory, read-only, full disk), in one line that names the file; the
            server refused the login; a transaction-mode pooler stands in front of it.

    Examples:
        >>> with sqlq.Queue("app.db") as q:  # created 0600, WAL mode
        ...     q.put(b"hello", tube="emails")
        1
    """

    def __init__(self, path: str | os.PathLike[str] | None = None, *,
                 durability: Durability = "full", max_job_size: int = DEFAULT_MAX_JOB_SIZE,
                 result_ttl: float = 86400.0, init: bool = False,
                 clock: Callable[[], int] | None = None, vfs: str | None = None,
                 driver: str | None = None) -> None:
        if path is None:
            path = os.environ.get("SQLQ_DB") or "sqlq.db"
        if isinstance(max_job_size, bool) or not isinstance(max_job_size, int) \
                or max_job_size < 0:
            raise ValueError(f"max_job_size must be a non-negative int, not {max_job_size!r}")
        if not isinstance(path, (str, os.PathLike)):
            raise TypeError(f"path must be a str or os.PathLike, not {type(path).__name__}")
        self.path = os.fspath(path)
        self.max_job_size = max_job_size
        self.result_ttl_ms = seconds_to_ms(result_ttl, "result_ttl")
        self._clock = clock or now_ms
        self._backend = open_backend(self.path, durability=durability, init=init,
                                     clock=self._clock, vfs=vfs, driver=driver)
        self._store = self._backend.store
        dispatch = Dispatcher(self._backend, self._clock)
        #: Every verb that puts or changes jobs (verbs/contract.py): for sqlq's own faces
        #: (the Job handle, the worker, the server), not applications.
        self.verbs = Verbs(dispatch, self._store)
        #: The other verbs (verbs/operations.py): subscriptions, limits, the registry ...
        self.operations = Operations(dispatch, self._store)
        #: The reservation engine (verbs/engine.py): for sqlq's own faces, not applications.
        self.engine = Engine(dispatch, functools.partial(Job.from_claim, self))
        self._job_from_row = functools.partial(Job.from_row, self)
        #: The read verbs (verbs/views.py): the reads of the dashboard, /metrics and
        #: ``sqlq top``, and those the Queue's own read methods call.
        self.views = Views(dispatch, self._store, self._job_from_row, max_job_size)
        self._closed = False
        self._lock_wait: float | None = None

    @property
    def durability(self) -> Durability:
        """``"full"`` or ``"normal"``, as opened (see Wakeup and durability in the docs)."""
        return self._backend.durability

    @property
    def backend(self) -> Backend:
        """The storage backend (``sqlq.backends``), for tools such as the beanstalkd server."""
        return self._backend

    @property
    def location(self) -> str:
        """The database as messages name it: the path, or the URL without a password."""
        return self._backend.location

    @property
    def lock_wait(self) -> float | None:
        """Seconds a write waits for another process's write lock before raising
        :class:`sqlq.Locked` (nothing written); None, the default, waits minutes. An event
        loop serving other clients too (``sqlq serve``) sets a short one and retries later."""
        return self._lock_wait

    @lock_wait.setter
    def lock_wait(self, seconds: float | None) -> None:
        self._lock_wait = None if seconds is None else check_seconds(seconds, "lock_wait")
        self._backend.set_lock_wait(self._lock_wait)

    # -- lifecycle ---------------------------------------------------------------------------

    def close(self) -> None:
        """Give back this Queue's reservations (as beanstalkd does for a closed connection)."""
        if self._closed:
            return
        self._closed = True
        try:
            token = self._backend.current_owner()
            if token is not None:
                try:
                    self.verbs.give_back(token)
                except Error:
                    # A read-only file, a full disk: closing must not fail. The backend
                    # ends our registration below, so the next reserve anywhere gives
                    # these reservations back all the same.
                    pass
        finally:
            self.engine.close()
            self._backend.close()

    def __enter__(self) -> Queue:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<sqlq.Queue {self.location!r} durability={self.durability}>"

    # -- reserve -----------------------------------------------------------------------------

    def reserve(self, tubes: str | Sequence[str] | None = None, timeout: float | None = None,
                *, delete: Job | None = None, detach: bool = False) -> Job | None:
        """Reserve the most urgent ready job in ``tubes``; None if none came within ``timeout``.

        ``timeout=None`` waits for ever, ``0`` returns at once. ``delete=job``
        deletes that (reserved) job and claims the next one in the same
        transaction: one commit per job instead of two, the worker's fast path.
        ``detach=True`` ties the reservation to no process: it lasts its TTR even
        after this Queue closes or the process exits (``sqlq reserve`` hands the job
        to a shell script and exits at once).

        A database server that goes away (a restart) is waited for as an empty queue
        is, up to ``timeout`` (a warning is logged); jobs this process holds stay its.

        Raises:
            JobLost: ``delete=job`` and that job's lease was lost (nothing is claimed).
            Disconnected: the connection was lost with ``timeout=0``, or with
                ``delete=job`` in flight (that delete may have committed:
                ``job.delete()`` again deletes it, or raises JobLost if it is gone).
            InvalidTube: a name in ``tubes`` is not a valid tube name.
            TypeError: ``tubes``, ``timeout``, ``delete`` or ``detach`` has the wrong type.

        Examples:
            >>> job = q.reserve(tubes=["thumbs", "emails"], timeout=5)
            >>> if job is not None:
            ...     handle(job.body)
            ...     job.delete()
        """
        engine = self.engine
        tubes_param = engine.tubes(tubes)
        deadline = timeout_deadline(timeout)
        if delete is not None and not isinstance(delete, Job):
            raise TypeError(f"delete must be a reserved Job or None, not {type(delete).__name__}")
        if detach.__class__ is not bool:
            raise TypeError(f"detach must be a bool, not {type(detach).__name__}")
        job = engine.claim_first(tubes_param, delete, detach, timeout)
        if job is not None or timeout == 0:
            engine.stop_lingering()
            return job
        owner = None if detach else ""  # "": a token each look fetches (and confirms)
        return engine.wait(lambda events: engine.look(tubes_param, owner, events),
                           deadline, functools.partial(engine.due, tubes_param), linger=True)

    def reserve_many(self, n: int, tubes: str | Sequence[str] | None = None,
                     timeout: float | None = None, *,
                     delete: Iterable[Job] | None = None) -> list[Job]:
        """Reserve up to ``n`` of the most urgent ready jobs in ``tubes`` in one commit.

        The jobs come in the order ``reserve`` would have returned them one at a time
        (priority, then id, across the tubes; paused tubes skipped; due delayed jobs
        and expired reservations taken as ready), each under a lease and a TTR of its
        own: one job's lease running out touches no other. ``timeout`` waits as
        ``reserve`` does, until at least one job can be claimed (None: for ever, 0:
        not at all); ``[]`` when none came.

        ``delete=jobs`` deletes those reserved jobs and claims the next batch in the
        same commit (a batch worker's fast path). The deletes under leases that still
        hold always stand; if any lease was lost, nothing is claimed and
        :class:`~sqlq.JobLost` names the lost jobs (``.job_ids``): they may run again
        elsewhere, as with every at-least-once queue.

        Each job still runs at least once, not exactly once: a worker that dies, or
        takes longer than a job's TTR, gives that job back to be run again. Prefetch
        only what you will finish within the TTR.

        Raises:
            JobLost: ``delete=jobs`` and some of their leases were lost (the others are
                deleted; nothing is claimed).
            InvalidTube: a name in ``tubes`` is not a valid tube name.
            TypeError: an argument has the wrong type.
            ValueError: ``n`` is below 1, or a job in ``delete`` was peeked, not reserved.

        Examples:
            >>> jobs = q.reserve_many(10, tubes="thumbs", timeout=5)
            >>> while jobs:
            ...     for job in jobs:
            ...         handle(job.body)
            ...     jobs = q.reserve_many(10, tubes="thumbs", timeout=5, delete=jobs)
        """
        engine = self.engine
        count = check_batch_size(n)
        tubes_param = engine.tubes(tubes)
        deadline = timeout_deadline(timeout)
        done = [] if delete is None else engine.reserved_jobs(delete, "delete")
        jobs = engine.claim_first_many(tubes_param, count, done, timeout)
        if jobs or timeout == 0:
            engine.stop_lingering()
            return jobs
        found = engine.wait(lambda events: engine.look_many(tubes_param, count, events),
                            deadline, functools.partial(engine.due, tubes_param), linger=True)
        return found or []

    def delete_many(self, jobs: Iterable[Job]) -> None:
        """Delete reserved jobs (``reserve``'s or ``reserve_many``'s) in one commit.

        Every job whose lease still holds is deleted, even when some lease was lost:
        the finished work is acknowledged either way. Then, if any lease was lost,
        :class:`~sqlq.JobLost` names those jobs (``.job_ids``); another worker may run
        them again (at least once, never silently dropped). Deleted handles read
        ``state == "deleted"``; the lost ones keep theirs.

        Raises:
            JobLost: some leases were lost (the other jobs were deleted).
            TypeError: ``jobs`` is not an iterable of Jobs.
            ValueError: a job was peeked, not reserved (use ``Queue.delete(id)``).

        Examples:
            >>> jobs = q.reserve_many(100, tubes="thumbs", timeout=0)
            >>> q.delete_many([job for job in jobs if handle(job.body)])
        """
        done = self.engine.reserved_jobs(jobs, "jobs")
        if done:
            self.engine.delete_many(done)

    def reserve_job(self, job_id: int) -> Job:
        """Reserve a specific job, whatever its state unless reserved (beanstalkd's reserve-job)."""
        check_job_id(job_id)
        return self.engine.claim_by_id(job_id, self._backend.owner_token())

    # -- verbs on jobs by id -----------------------------------------------------------------

    def delete(self, job_id: int, *, lease: int | None = None, by: str | None = None) -> None:
        """Delete a job in any state (an administrator's delete when no lease is given).

        The job leaves a record (:meth:`finished`): ``done`` when deleted under its
        lease, else ``deleted``, with ``by`` (who asked: "dashboard", "cli", a name of
        yours; 1 to 200 characters) if given.

        Raises:
            JobNotFound: no such job.
            JobLost: ``lease`` is given and is no longer the job's reservation.

        Examples:
            >>> q.delete(7, by="ops: duplicate order")
        """
        check_job_id(job_id)
        check_lease(lease)
        self.verbs.delete(job_id, lease, check_by(by))

    def release(self, job_id: int, *, priority: int | None = None, delay: float = 0,
                lease: int | None = None) -> None:
        """Put a reserved job back, ready or delayed by ``delay`` seconds.

        Raises:
            JobNotFound: no such job, or it is not reserved.
            JobLost: ``lease`` is given and is no longer the job's reservation.

        Examples:
            >>> q.release(7, delay=60)  # try again in a minute
        """
        check_job_id(job_id)
        check_lease(lease)
        if priority is not None:
            check_priority(priority)
        self.verbs.release(job_id, lease, priority, seconds_to_ms(delay, "delay"))

    def bury(self, job_id: int, *, priority: int | None = None, reason: str | None = None,
             lease: int | None = None) -> None:
        """Park a reserved job until kicked; ``reason`` is kept (peek shows it).

        Raises:
            JobNotFound: no such job, or it is not reserved.
            JobLost: ``lease`` is given and is no longer the job's reservation.

        Examples:
            >>> q.bury(7, reason="corrupt image")
        """
        check_job_id(job_id)
        check_lease(lease)
        if priority is not None:
            check_priority(priority)
        if reason is not None and not isinstance(reason, str):
            raise TypeError(f"reason must be a str or None, not {type(reason).__name__}")
        self.verbs.bury(job_id, lease, priority, reason)

    def touch(self, job_id: int, *, lease: int | None = None) -> int:
        """Restart a reservation's TTR; return the new deadline in ms.

        Raises:
            JobNotFound: no such job, or it is not reserved.
            JobLost: ``lease`` is given and is no longer the job's reservation.
        """
        check_job_id(job_id)
        check_lease(lease)
        return self.verbs.touch(job_id, lease)

    # -- control of running jobs (logic in control.py) ---------------------------------------

    def cancel(self, job_id: int, *, by: str | None = None) -> None:
        """Cancel a job: it will not run (again).

        A ready, delayed, buried or waiting job is deleted (as :meth:`delete` deletes
        it: a parent's children are released). A reserved job is deleted too, and its
        holder's next ``touch``, ``delete``, ``release``, ``bury``, ``complete`` or
        ``progress`` raises :class:`~sqlq.JobCancelled` (a JobLost); ``sqlq work`` stops
        it within about a second. No claim, expired lease or dead worker can hand it
        out again. Observers see it gone at once (``peek`` None); its record
        (:meth:`finished`) says ``cancelled``, with ``by`` (who asked) if given.

        Raises:
            JobNotFound: no such live job.

        Examples:
            >>> q.cancel(7)
        """
        check_job_id(job_id)
        self.verbs.cancel(job_id, control.KEEP_CANCELLED_MS, check_by(by))

    def progress(self, job_id: int, value: float, message: str | None = None, *,
                 lease: int | None = None) -> None:
        """Store a reserved job's progress: ``value`` a fraction 0-1 (float) or a count
        (int), ``message`` a short line (at most 1024 characters). Anyone reads it
        (``stats_job(id)["progress"]``, ``sqlq peek``, ``result(on_progress=)``). One
        small UPDATE of the job's row (and, on PostgreSQL, a NOTIFY for result waiters):
        nothing is rate-limited, so call it at the pace a person can read.

        Raises:
            JobNotFound: no such job, or it is not reserved (without ``lease``).
            JobLost: ``lease`` is given and is no longer the job's reservation.
            JobCancelled: the job was cancelled.

        Examples:
            >>> job.progress(0.5, "halfway")  # Job.progress: under its lease
        """
        check_job_id(job_id)
        check_lease(lease)
        self.verbs.progress(job_id, lease, *control.check_progress(value, message))

    def kick(self, bound: int, tube: str = DEFAULT_TUBE) -> int:
        """Move up to ``bound`` buried jobs (or, if none, delayed ones) to ready; say how many.

        A tube with no such jobs (empty, or never used) kicks 0: not an error. A bound
        past any number of jobs the database can hold kicks them all.

        Raises:
            InvalidTube: ``tube`` is not a valid tube name.

        Examples:
            >>> q.kick(100, tube="thumbs")
            3
        """
        if isinstance(bound, bool) or not isinstance(bound, int):
            raise TypeError(f"bound must be an int, not {type(bound).__name__}")
        if bound < 0:
            raise ValueError(f"bound must be >= 0, not {bound}")
        check_tube(tube)
        return self.verbs.kick(tube, min(bound, MAX_JOB_ID))

    def kick_job(self, job_id: int) -> None:
        """Move one buried or delayed job to ready.

        Raises:
            JobNotFound: no such job, or it is neither buried nor delayed.
        """
        check_job_id(job_id)
        self.verbs.kick_job(job_id)

    def postpone(self, job_id: int, delay: float) -> None:
        """Make a ready or delayed job wait ``delay`` seconds from now before it can be
        reserved (a delayed job's remaining delay is replaced; ``0`` makes it ready now).

        Raises:
            JobNotFound: no such job, or it is reserved, buried or waiting.

        Examples:
            >>> q.postpone(7, 3600)  # not before an hour from now
        """
        check_job_id(job_id)
        self.verbs.postpone(job_id, seconds_to_ms(delay, "delay"))

    # -- results (logic in results.py) -------------------------------------------------------

    def complete(self, job_id: int, result: bytes | str = b"", *,
                 lease: int | None = None) -> None:
        """Delete the job and keep its result for ``result_ttl`` seconds, in one durable commit.

        Lease-checked like :meth:`delete`. Expired results are purged a few at a
        time here, so the file stays bounded without a reaper process.

        Raises:
            JobNotFound: no such job.
            JobLost: ``lease`` is given and is no longer the job's reservation.
            JobTooBig: the result is larger than ``max_job_size``.
        """
        check_job_id(job_id)
        check_lease(lease)
        data = check_body(result, self.max_job_size, "result")
        self.verbs.complete(job_id, lease, data, self.result_ttl_ms)

    # -- operations --------------------------------------------------------------------------

    def backup(self, dest: str | os.PathLike[str], *, force: bool = False,
               progress: OnProgress | None = None) -> Backup:
        """Write a consistent copy of the queue to the new SQLite file ``dest`` (mode
        0600, atomically) while producers and workers go on: every job committed before
        the call is in it. A PostgreSQL queue is copied as ``sqlq copy`` moves it (a
        reserved job as ready). ``progress``, if given, is called as the copy is written
        (from another thread while SQLite's copy runs), as ``progress(count, fraction)``:
        bytes written of a file, jobs copied of a PostgreSQL queue, and the fraction of
        the whole (0-1); ``sqlq backup`` draws it as a bar. Logic in backup.py.

        Raises:
            Error: dest exists (unless ``force``), is not a regular file, is in a
                missing directory, is one of a database's own files (the queue's, its
                -wal, -shm, -journal or -sqlq directory; any ``*-wal``, ``*-shm``,
                ``*-journal``), or cannot be written; nothing is changed.
        """
        from .backup import backup  # loaded on first use: most processes never back up

        return backup(self._backend, dest, force=force, clock=self._clock, progress=progress)

    # -- tasks (logic in tasks/task.py, tasks/periodic.py; run by `sqlq work`) -----------------

    def record_durations(self, tally: Tally) -> None:
        """Add a worker's observations to the database's histograms in one short write
        transaction (``sqlq work`` calls this at most every ten seconds, never per job).
        Nothing is cleared here: the caller clears ``tally`` once this returns."""
        rows = tally.rows()
        if rows:
            self.operations.record_durations(rows)

    @overload
    def task(self, fn: Callable[_P, _R], /) -> Task[_P, _R]: ...

    @overload
    def task(self, fn: None = None, /, *, name: str | None = None, tube: str = DEFAULT_TUBE,
             priority: int = DEFAULT_PRIORITY, ttr: float = DEFAULT_TTR, retries: int = 3,
             backoff: Backoff = 1.0, keepalive: bool = False, timeout: float | None = None,
             ) -> Callable[[Callable[_P, _R]], Task[_P, _R]]: ...

    def task(self, fn: Callable[_P, _R] | None = None, /, **options: Any) -> Any:
        """Make a function a task: ``f(...)`` still runs it here, ``f.put(...)`` enqueues it.

        Arguments travel as JSON (never pickle) and are checked when put; a return value
        other than None is stored as the job's JSON result (``q.result(id)``).

        Args:
            name: the registry name (default ``module.qualname``), what a job's body names.
            tube, priority, ttr: the defaults of its jobs (``.options()`` overrides them).
            retries: runs after a failed first one, with backoff, before burying.
            backoff: seconds before the first retry (doubling, jittered) or a tenacity wait.
            keepalive: touch the job at 80% of its TTR while it runs (long tasks).
            timeout: seconds a run may take, whatever the heartbeat keeps alive: ``sqlq
                work`` then cancels an ``async def`` task, and makes a plain function's next
                ``sqlq.current_job()`` raise :class:`sqlq.Timeout` (Python cannot stop a
                thread); the run fails (``timed out``) and is retried or buried.
        """
        from .tasks.task import decorator

        return decorator(self, fn, **options)

    def periodic(self, fn: Callable[[], _R] | None = None, /, *, every: float | None = None,
                 cron: str | None = None, **options: Any) -> Any:
        """A task without arguments that workers enqueue once per slot: ``every`` seconds
        or on a ``cron`` expression (local time), however many workers share the file.
        Other options are :meth:`task`'s."""
        from .tasks.periodic import Schedule
        from .tasks.task import decorator

        return decorator(self, fn, periodic=Schedule(every, cron), **options)

    def enqueue_periodic(self, name: str, slot_ms: int, body: bytes, *, tube: str,
                         priority: int, ttr: float, unique_key: str) -> int | None:
        """Put a periodic task's job for the slot starting at ``slot_ms``, unless that
        slot (or a later one) was enqueued already, by any process; the new job's id,
        or None. The slot is recorded in the same transaction as the put."""
        body = check_body(body, self.max_job_size)
        put = describe_put(tube, priority, 0, ttr, unique_key)
        return self.operations.enqueue_periodic(put, body, name, slot_ms)

    # -- transactions ------------------------------------------------------------------------

    @contextmanager
    def transaction(self) -> Iterator[Transaction]:
        """One durable write transaction for the application's SQL and sqlq's puts together."""
        with self._backend.transaction() as conn:
            yield Transaction(self, conn)
