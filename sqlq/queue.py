"""The Queue: sqlq's Python API (see SPEC.md for the contract of every name)."""

from __future__ import annotations

import os
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, ParamSpec, TypeVar, overload

import apsw

from . import owners, results, stats, store, topics
from .db import Database, Durability, data_version
from .durations import now_ms
from .errors import Error
from .model import (
    DEFAULT_MAX_JOB_SIZE,
    DEFAULT_PRIORITY,
    DEFAULT_TTR,
    DEFAULT_TUBE,
    MAX_JOB_ID,
    Job,
    check_body,
    check_job_id,
    check_priority,
    check_put_options,
    check_seconds,
    check_tube,
    check_tubes,
    job_id_in_range,
    seconds_to_ms,
)
from .wakeup import FIRST_RECHECKS, RECHECK_DELAYS, Events, Notifier, PollingNotifier, make_notifier

_T = TypeVar("_T")

if TYPE_CHECKING:
    from .work.retry import Backoff
    from .work.tasks import Task

_P = ParamSpec("_P")
_R = TypeVar("_R")


def _timeout_deadline(timeout: float | None) -> float | None:
    """The monotonic deadline of a wait of ``timeout`` seconds (None: no deadline).

    Bounded as every duration is (check_seconds): a float past it would overflow the
    deadline or the poll it becomes; waiting for ever is ``timeout=None``.
    """
    if timeout is None:
        return None
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or timeout != timeout:
        raise TypeError(f"timeout must be a number of seconds or None, not {timeout!r}")
    return time.monotonic() + check_seconds(timeout, "timeout")


class Queue:
    """A durable job queue in one SQLite file, shared by any number of processes.

    Args:
        path: the database file; default ``$SQLQ_DB`` or ``./sqlq.db``. Created
            (mode 0600, WAL) if missing.
        durability: ``"full"`` fsyncs every put, delete and bury before it returns
            (survives power loss); ``"normal"`` survives any process crash but may
            lose the last commits on power loss, for about 3x the throughput.
        max_job_size: the largest body accepted, in bytes (default 1 MiB).
        result_ttl: seconds a job's result is kept (default 24 h).
        init: add sqlq's tables to an existing database of another application
            (or an empty file) instead of refusing it.
        clock: a function returning the time in ms since the epoch (tests pass a fake).
        vfs: the name of a registered SQLite VFS to open the file with (the power-cut
            tests pass one that forgets unsynced writes); default: SQLite's own.

    A Queue may be shared between threads (calls are serialised); create it after
    ``fork()``, not before.
    """

    def __init__(self, path: str | os.PathLike[str] | None = None, *,
                 durability: Durability = "full", max_job_size: int = DEFAULT_MAX_JOB_SIZE,
                 result_ttl: float = 86400.0, init: bool = False,
                 clock: Callable[[], int] | None = None, vfs: str | None = None) -> None:
        if path is None:
            path = os.environ.get("SQLQ_DB") or "sqlq.db"
        if isinstance(max_job_size, bool) or not isinstance(max_job_size, int) \
                or max_job_size < 0:
            raise ValueError(f"max_job_size must be a non-negative int, not {max_job_size!r}")
        self.path = os.fspath(path)
        self.max_job_size = max_job_size
        self.result_ttl_ms = seconds_to_ms(result_ttl, "result_ttl")
        self._clock = clock or now_ms
        self._db = Database(self.path, durability=durability, init=init, clock=self._clock,
                            vfs=vfs)
        self._owner: owners.Owner | None = None
        # One notifier per thread: threads waiting on a shared Queue must not
        # consume each other's events.
        self._notifiers = threading.local()
        self._all_notifiers: list[Notifier | PollingNotifier] = []
        self._data_version = -1
        self._counts: Counter[tuple[str, str]] = Counter()  # (counter, tube), since opened
        self._closed = False
        self._tubes_cache: dict[object, str] = {}

    @property
    def durability(self) -> Durability:
        return self._db.durability

    @property
    def lock_wait(self) -> float | None:
        """Seconds a write waits for another process's write lock before raising
        :class:`sqlq.Locked` (nothing written); None, the default, waits as long as
        sqlq does everywhere (minutes). An event loop that must go on serving other
        clients (``sqlq serve``) sets a short one and retries later."""
        return self._db.lock_wait

    @lock_wait.setter
    def lock_wait(self, seconds: float | None) -> None:
        self._db.lock_wait = None if seconds is None else check_seconds(seconds, "lock_wait")

    # -- lifecycle ---------------------------------------------------------------------------

    def close(self) -> None:
        """Give back this Queue's reservations (as beanstalkd does for a closed connection)."""
        if self._closed:
            return
        self._closed = True
        try:
            if self._owner is not None:
                token = self._owner.token
                try:
                    self._db.write(lambda c: store.release_owner(c, token), durable=False)
                except Error:
                    # A read-only file, a full disk: closing must not fail. Our owner
                    # file is unlocked below, so the next reserve anywhere gives these
                    # reservations back all the same.
                    pass
        finally:
            if self._owner is not None:
                self._owner.close()
            for notifier in self._all_notifiers:
                notifier.close()
            self._db.close()

    def __enter__(self) -> Queue:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<sqlq.Queue {self.path!r} durability={self.durability}>"

    # -- put ---------------------------------------------------------------------------------

    def put(self, body: bytes | str, *, tube: str = DEFAULT_TUBE,
            priority: int = DEFAULT_PRIORITY, delay: float = 0, ttr: float = DEFAULT_TTR,
            unique_key: str | None = None) -> int:
        """Add a job and return its id (durable when this returns, in ``full`` mode).

        With ``unique_key``, while a job with that key is live in the tube, return
        that job's id and insert nothing.
        """
        body = check_body(body, self.max_job_size)
        check_tube(tube)
        delay_ms, ttr_ms = check_put_options(priority, delay, ttr, unique_key)
        job_id = self._db.write(lambda c: store.insert_job(
            c, self._clock(), tube, priority, delay_ms, ttr_ms, body, unique_key),
            single=unique_key is None)
        self._counts["total-jobs", tube] += 1
        return job_id

    def put_many(self, bodies: Iterable[bytes | str], *, tube: str = DEFAULT_TUBE,
                 priority: int = DEFAULT_PRIORITY, delay: float = 0,
                 ttr: float = DEFAULT_TTR) -> list[int]:
        """Add many jobs in one transaction (all or none); return their ids in order."""
        if isinstance(bodies, (bytes, str)):
            raise TypeError("bodies must be an iterable of bodies, not a single body")
        checked = [check_body(b, self.max_job_size) for b in bodies]
        check_tube(tube)
        delay_ms, ttr_ms = check_put_options(priority, delay, ttr)
        ids = self._db.write(lambda c: store.insert_jobs(
            c, self._clock(), tube, priority, delay_ms, ttr_ms, checked))
        self._counts["total-jobs", tube] += len(ids)
        return ids

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
        """
        tubes_json = self._tubes_param(tubes)
        deadline = _timeout_deadline(timeout)
        owner = None if detach else self._owner_token()
        job = self._claim(tubes_json, owner, delete)
        if job is None and self._reap_dead_owners():
            job = self._claim(tubes_json, owner, None)
        if job is not None or timeout == 0:
            return job
        return self._wait_and_claim(tubes_json, owner, deadline)

    def try_reserve(self, tubes: str | Sequence[str] | None = None) -> Job | None:
        """One non-blocking claim attempt (for event loops: see ``notifier``)."""
        return self._claim(self._tubes_param(tubes), self._owner_token(), None)

    def reserve_job(self, job_id: int) -> Job:
        """Reserve a specific job, whatever its state unless reserved (beanstalkd's reserve-job)."""
        check_job_id(job_id)
        owner = self._owner_token()
        row = self._db.write(lambda c: store.claim_by_id(c, self._clock(), job_id, owner),
                             durable=False)
        return Job.from_claim(self, row)

    def _claim(self, tubes_json: str, owner: str | None, delete: Job | None) -> Job | None:
        clock = self._clock

        def claim(c: apsw.Connection) -> Any:
            now = clock()
            if delete is not None:
                store.delete(c, now, delete.id, lease)
            row = store.claim(c, now, tubes_json, owner)
            if row is None:
                # The baseline a waiter compares data_version with must come from
                # the snapshot that found nothing, or a commit could slip between.
                self._note_data_version(c)
            return row

        if delete is None:
            row = self._db.write(claim, durable=False)
        else:
            lease = delete._require_lease()
            row = self._db.write(claim)
            delete.state = "deleted"
            self._counts["cmd-delete", delete.tube] += 1
        return None if row is None else Job.from_claim(self, row)

    def _wait_and_claim(self, tubes_json: str, owner: str | None,
                        deadline: float | None) -> Job | None:
        """Sleep on the notifier until a job can be claimed or the deadline passes.

        Every wake-up first looks without the write lock (has_ready_job), so idle
        workers woken by unrelated commits never contend with producers.
        """
        def look(events: Events) -> tuple[bool, Job | None]:
            if events.owner and self._reap_dead_owners():
                job = self._claim(tubes_json, owner, None)
                if job is not None:
                    return True, job
            changed, ready = self._db.read(lambda c: (
                self._note_data_version(c), store.has_ready_job(c, self._clock(), tubes_json)))
            return changed, self._claim(tubes_json, owner, None) if ready else None

        def due() -> int | None:
            return self._db.read(lambda c: store.next_due(c, self._clock(), tubes_json))

        return self._wait(look, deadline, due)

    def _wait(self, look: Callable[[Events], tuple[bool, _T | None]], deadline: float | None,
              due: Callable[[], int | None] | None = None) -> _T | None:
        """Sleep on the notifier until ``look`` finds something or the deadline passes.

        The one wait loop behind reserve and result. ``look(events)`` returns, from
        one read snapshot, whether another connection committed since the last look
        (``_note_data_version``) and what it found (None: keep waiting). A write
        event that data_version does not confirm yet is looked at again on the
        RECHECK_DELAYS schedule: the commit may not be published yet. ``due()``
        gives the time (ms) something may change without a commit (a delayed job).
        """
        notifier = self._ensure_notifier()
        notifier.resume()  # watches cost every write a kernel event: only while waiting
        try:
            return self._wait_watched(notifier, look, deadline, due)
        finally:
            notifier.pause()

    def _wait_watched(self, notifier: Notifier | PollingNotifier,
                      look: Callable[[Events], tuple[bool, _T | None]], deadline: float | None,
                      due: Callable[[], int | None] | None) -> _T | None:
        # The caller's last look ran before the watch began: a commit written then
        # may still be unpublished, and its event is gone. So the first pass looks
        # at once and treats that as a write event (the re-check schedule runs).
        unconfirmed = 0  # > 0: re-checking an unconfirmed write event, step number
        steps = len(RECHECK_DELAYS)
        events = Events(commit=True)
        first = True
        while True:
            changed, found = look(events)
            if found is not None:
                return found
            if events.commit:
                # Even when data_version moved (``changed``), the events drained together
                # may include the write of a later commit not published yet (a waiter woken
                # late drains both): only running the re-check schedule is sure to see it.
                # The first pass has no event, only the chance of one missed: a few quick
                # re-checks cover a commit being published (sqlq's fsync'd commits also
                # signal once visible), so an idle worker's wait costs a handful of reads.
                unconfirmed = 1
                steps = FIRST_RECHECKS if first else len(RECHECK_DELAYS)
            elif unconfirmed:
                unconfirmed = unconfirmed + 1 if unconfirmed < steps else 0
            first = False
            now = time.monotonic()
            if deadline is not None and now >= deadline:
                return None
            wait = None if deadline is None else deadline - now
            due_ms = None if due is None else due()
            if due_ms is not None:
                until_due = max((due_ms - self._clock()) / 1000, 0.0)
                wait = until_due if wait is None else min(wait, until_due)
            if unconfirmed:
                step = RECHECK_DELAYS[unconfirmed - 1]
                wait = step if wait is None else min(wait, step)
            events = notifier.wait(wait) if wait is None or wait > 0 else Events()

    def _note_data_version(self, conn: apsw.Connection) -> bool:
        """True if another connection committed since we last looked."""
        version = data_version(conn)
        changed = version != self._data_version
        self._data_version = version
        return bool(changed)

    @property
    def notifier(self) -> Notifier | PollingNotifier:
        """The wakeup source: ``fileno()`` for an event loop, then ``drain()``; watching
        from now on (look once more after taking it)."""
        notifier = self._ensure_notifier()
        notifier.resume()
        return notifier

    def has_ready(self, tubes: str | Sequence[str] | None = None) -> bool:
        """Whether a reserve on ``tubes`` would find a job now; a read, no write lock."""
        tubes_json = self._tubes_param(tubes)
        return self._db.read(lambda c: store.has_ready_job(c, self._clock(), tubes_json))

    def next_wakeup(self, tubes: str | Sequence[str] | None = None) -> float | None:
        """Seconds until a delayed job, a TTR or a pause may make a job ready in tubes."""
        tubes_json = self._tubes_param(tubes)
        due = self._db.read(lambda c: store.next_due(c, self._clock(), tubes_json))
        return None if due is None else max((due - self._clock()) / 1000, 0.0)

    def _tubes_param(self, tubes: str | Sequence[str] | None) -> str:
        """The :tubes JSON for a reserve, checked once per distinct argument (a worker
        asks for the same tubes on every call)."""
        try:
            key = tubes if tubes is None or tubes.__class__ is str else tuple(tubes)
            found = self._tubes_cache.get(key)
        except TypeError:  # not iterable, or unhashable items: check_tubes says what is wrong
            return store.tubes_json(check_tubes(tubes))
        if found is None:
            found = store.tubes_json(check_tubes(tubes))
            if len(self._tubes_cache) < 256:
                self._tubes_cache[key] = found
        return found

    def _owner_token(self) -> str:
        if self._owner is None:
            self._owner = owners.Owner(self.path)
        return self._owner.token

    def _ensure_notifier(self) -> Notifier | PollingNotifier:
        notifier: Notifier | PollingNotifier | None = getattr(self._notifiers, "notifier", None)
        if notifier is None:
            notifier = make_notifier(self.path, owners.ensure_dir(self.path))
            self._notifiers.notifier = notifier
            self._all_notifiers.append(notifier)
        return notifier

    def _reap_dead_owners(self) -> bool:
        """Give back the reservations of processes that died; True if any came back."""
        me = self._owner.token if self._owner else ""
        held = self._db.read(lambda c: store.reserving_owners(c, self._clock(), me))
        dead = [token for token in held if not owners.is_alive(self.path, token)]
        if not dead:
            return False
        released = self._db.write(
            lambda c: sum(store.release_owner(c, token) for token in dead), durable=False)
        for token in dead:
            owners.forget(self.path, token)
        return released > 0

    # -- verbs on jobs by id -----------------------------------------------------------------

    def delete(self, job_id: int, *, lease: int | None = None) -> None:
        """Delete a job in any state (an administrator's delete when no lease is given)."""
        check_job_id(job_id)
        tube = self._db.write(lambda c: store.delete(c, self._clock(), job_id, lease),
                              single=True)
        self._counts["cmd-delete", tube] += 1

    def release(self, job_id: int, *, priority: int | None = None, delay: float = 0,
                lease: int | None = None) -> None:
        """Put a reserved job back, ready or delayed by ``delay`` seconds."""
        check_job_id(job_id)
        if priority is not None:
            check_priority(priority)
        delay_ms = seconds_to_ms(delay, "delay")
        self._db.write(lambda c: store.release(c, self._clock(), job_id, lease, priority,
                                               delay_ms), durable=False, single=True)

    def bury(self, job_id: int, *, priority: int | None = None, reason: str | None = None,
             lease: int | None = None) -> None:
        """Park a reserved job until kicked; ``reason`` is kept (peek shows it)."""
        check_job_id(job_id)
        if priority is not None:
            check_priority(priority)
        if reason is not None and not isinstance(reason, str):
            raise TypeError(f"reason must be a str or None, not {type(reason).__name__}")
        self._db.write(lambda c: store.bury(c, self._clock(), job_id, lease, priority, reason),
                       single=True)

    def touch(self, job_id: int, *, lease: int | None = None) -> int:
        """Restart a reservation's TTR; return the new deadline in ms."""
        check_job_id(job_id)
        return self._db.write(lambda c: store.touch(c, self._clock(), job_id, lease),
                              durable=False, single=True)

    def kick(self, bound: int, tube: str = DEFAULT_TUBE) -> int:
        """Move up to ``bound`` buried jobs (or, if none, delayed ones) to ready; say how many.

        A bound past any number of jobs the file can hold kicks them all.
        """
        if isinstance(bound, bool) or not isinstance(bound, int):
            raise TypeError(f"bound must be an int, not {type(bound).__name__}")
        if bound < 0:
            raise ValueError(f"bound must be >= 0, not {bound}")
        check_tube(tube)
        limit = min(bound, MAX_JOB_ID)
        return self._db.write(lambda c: store.kick(c, self._clock(), tube, limit))

    def kick_job(self, job_id: int) -> None:
        """Move one buried or delayed job to ready."""
        check_job_id(job_id)
        self._db.write(lambda c: store.kick_job(c, self._clock(), job_id), single=True)

    def pause_tube(self, tube: str, seconds: float) -> None:
        """Reserve nothing from ``tube`` for ``seconds`` (0 ends a pause)."""
        check_tube(tube)
        pause_ms = seconds_to_ms(seconds, "seconds")
        self._db.write(lambda c: store.pause_tube(c, self._clock(), tube, pause_ms))
        self._counts["cmd-pause-tube", tube] += 1

    # -- results and fan-out (logic in results.py, topics.py) --------------------------------

    def complete(self, job_id: int, result: bytes | str = b"", *,
                 lease: int | None = None) -> None:
        """Delete the job and keep its result for ``result_ttl`` seconds, in one durable commit.

        Lease-checked like :meth:`delete`. Expired results are purged a few at a
        time here, so the file stays bounded without a reaper process.
        """
        tube = results.complete(self, job_id, result, lease)
        self._counts["cmd-delete", tube] += 1

    def result(self, job_id: int, timeout: float | None = None) -> bytes:
        """Wait for a job's result and return it; it can be read again until it expires.

        Sleeps on the same notifier as :meth:`reserve`. ``timeout=None`` waits for
        ever, ``0`` only looks.

        Raises:
            JobBuried: the job was buried (``.reason`` says why).
            Timeout: no result within ``timeout`` seconds.
            JobNotFound: no such id was issued, or its result expired, or the job was
                deleted without a result.
        """
        return results.wait(self, job_id, timeout)

    def subscribe(self, topic: str, tube: str) -> None:
        """Have :meth:`publish` to ``topic`` put a copy into ``tube`` (idempotent)."""
        topics.subscribe(self, topic, tube)

    def unsubscribe(self, topic: str, tube: str) -> bool:
        """Stop copying ``topic`` into ``tube``; True if it was subscribed."""
        return topics.unsubscribe(self, topic, tube)

    def subscriptions(self, topic: str | None = None) -> list[tuple[str, str]]:
        """The ``(topic, tube)`` subscriptions, sorted; only ``topic``'s when given."""
        return topics.subscriptions(self, topic)

    def publish(self, topic: str, body: bytes | str, *, priority: int = DEFAULT_PRIORITY,
                delay: float = 0, ttr: float = DEFAULT_TTR,
                unique_key: str | None = None) -> list[int]:
        """Put one copy of a job into every tube subscribed to ``topic``, in one transaction.

        Returns the ids in tube-name order; ``[]`` when nothing is subscribed.
        Subscribers pull: a worker that was down finds every copy in its tube.
        """
        return topics.publish(self, topic, body, priority=priority, delay=delay, ttr=ttr,
                              unique_key=unique_key)

    # -- observers ---------------------------------------------------------------------------

    def peek(self, job_id: int) -> Job | None:
        """The job as of now, or None if there is no such job."""
        if not job_id_in_range(job_id):
            return None
        row = self._db.read(lambda c: store.select_job(c, self._clock(), job_id))
        return None if row is None else Job.from_row(self, row)

    def _peek(self, which: str, tube: str) -> Job | None:
        check_tube(tube)

        def look(c: apsw.Connection) -> Any:
            now = self._clock()
            job_id = store.peek_id(c, now, which, tube)
            return None if job_id is None else store.select_job(c, now, job_id)

        row = self._db.read(look)
        return None if row is None else Job.from_row(self, row)

    def peek_ready(self, tube: str = DEFAULT_TUBE) -> Job | None:
        """The job the next reserve on ``tube`` would get (pauses aside), or None."""
        return self._peek("ready", tube)

    def peek_delayed(self, tube: str = DEFAULT_TUBE) -> Job | None:
        """The delayed job due soonest in ``tube``, or None."""
        return self._peek("delayed", tube)

    def peek_buried(self, tube: str = DEFAULT_TUBE) -> Job | None:
        """The oldest buried job in ``tube``, or None."""
        return self._peek("buried", tube)

    def tubes(self) -> list[str]:
        """Tubes that hold jobs, are paused or subscribed to a topic, and ``default``, sorted."""
        found = self._db.read(lambda c: store.list_tubes(c, self._clock()))
        return sorted(set(found) | {DEFAULT_TUBE})

    def stats(self) -> dict[str, Any]:
        """Counts for the whole file, with beanstalkd's key names (see stats.py)."""
        return stats.file_stats(self)

    def stats_tube(self, tube: str) -> dict[str, Any]:
        """One tube's counts with beanstalkd's keys; JobNotFound for a tube that does not
        exist. ``total-jobs``, ``cmd-delete`` and ``cmd-pause-tube`` count what this
        Queue did since it was opened, as beanstalkd counts since its start."""
        return stats.tube_stats(self, tube)

    def stats_job(self, job_id: int) -> dict[str, Any]:
        """One job's record with beanstalkd's keys (times in whole seconds)."""
        return stats.job_stats(self, job_id)

    # -- tasks (logic in work/tasks.py, work/periodic.py; run by `sqlq work`) -----------------

    @overload
    def task(self, fn: Callable[_P, _R], /) -> Task[_P, _R]: ...

    @overload
    def task(self, fn: None = None, /, *, name: str | None = None, tube: str = DEFAULT_TUBE,
             priority: int = DEFAULT_PRIORITY, ttr: float = DEFAULT_TTR, retries: int = 3,
             backoff: Backoff = 1.0, keepalive: bool = False,
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
        """
        from .work.tasks import decorator

        return decorator(self, fn, **options)

    def periodic(self, fn: Callable[[], _R] | None = None, /, *, every: float | None = None,
                 cron: str | None = None, **options: Any) -> Any:
        """A task without arguments that workers enqueue once per slot: ``every`` seconds
        or on a ``cron`` expression (local time), however many workers share the file.
        Other options are :meth:`task`'s."""
        from .work.periodic import Schedule
        from .work.tasks import decorator

        return decorator(self, fn, periodic=Schedule(every, cron), **options)

    # -- transactions ------------------------------------------------------------------------

    @contextmanager
    def transaction(self) -> Iterator[Transaction]:
        """One durable write transaction for the application's SQL and sqlq's puts together."""
        with self._db.transaction() as conn:
            yield Transaction(self, conn)


class Transaction:
    """What ``with q.transaction() as tx`` hands out: SQL and puts in one commit."""

    def __init__(self, queue: Queue, conn: apsw.Connection) -> None:
        self.queue = queue
        self._conn = conn

    def execute(self, sql: str,
                params: Sequence[Any] | dict[str, Any] = ()) -> list[tuple[Any, ...]]:
        """Run the application's own SQL in the transaction; return the rows."""
        return list(self._conn.execute(sql, params))

    def put(self, body: bytes | str, **options: Any) -> int:
        """``Queue.put`` inside this transaction."""
        return self.queue.put(body, **options)

    def put_many(self, bodies: Iterable[bytes | str], **options: Any) -> list[int]:
        """``Queue.put_many`` inside this transaction."""
        return self.queue.put_many(bodies, **options)

    def publish(self, topic: str, body: bytes | str, **options: Any) -> list[int]:
        """``Queue.publish`` inside this transaction."""
        return self.queue.publish(topic, body, **options)
