"""AsyncQueue: the Queue's verbs as coroutines, for asyncio applications.

One implementation of the semantics: every verb is the :class:`~sqlq.Queue`'s
own, run in the AsyncQueue's one thread. SQLite calls are short, but a write
may wait seconds for another process's lock, and the loop must never wait with
it. Calls are serialised on the Queue's connection anyway, so one thread serves
them all; a transaction gets a thread of its own for as long as it is open
(SQLite's transaction belongs to the thread that began it).

Waiting holds no thread: a coroutine blocked in :meth:`AsyncQueue.reserve` or
:meth:`AsyncQueue.result` is a future that one task per AsyncQueue fills when
the backend's notifier, registered with the loop, says something may have
changed (``asyncwait.py``). A cancelled ``reserve`` leaves no lease behind.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import logging
import os
from collections.abc import AsyncIterator, Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any, TypeVar

from . import results
from .asyncwait import Waiter, Waiters
from .backends import Events
from .errors import Disconnected, Error, JobLost, JobNotFound, Timeout
from .model import (
    DEFAULT_PRIORITY,
    DEFAULT_TTR,
    DEFAULT_TUBE,
    Job,
    check_batch_size,
    check_job_id,
    check_tubes,
)
from .queue import Queue
from .waiting import timeout_deadline

if TYPE_CHECKING:
    from . import observe
    from .attempts import Attempt
    from .queue import Transaction
    from .work.tasks import Task, TaskOptions

T = TypeVar("T")
log = logging.getLogger("sqlq")

#: The transaction open in this task: (its AsyncQueue, the thread that holds it, the task).
#: Tasks created inside inherit the variable but not the transaction (the task is checked),
#: as a thread started inside a Queue's transaction does not join it.
_open_tx: contextvars.ContextVar[tuple[AsyncQueue, ThreadPoolExecutor, object] | None] = \
    contextvars.ContextVar("sqlq_open_tx", default=None)


def _tx_executor(aq: AsyncQueue) -> ThreadPoolExecutor | None:
    """The thread of aq's transaction open in the current task, if any."""
    tx = _open_tx.get()
    if tx is None or tx[0] is not aq or tx[2] is not asyncio.current_task():
        return None
    return tx[1]


class AsyncJob:
    """A reserved (or peeked) job: the :class:`~sqlq.Job`'s fields, its verbs awaited.

    ``job.sync`` is the Job itself (for code that runs in a thread).
    """

    __slots__ = ("_aq", "sync")

    def __init__(self, aq: AsyncQueue, job: Job) -> None:
        self._aq = aq
        self.sync = job

    def __repr__(self) -> str:
        return repr(self.sync)

    # The record, read through (see Job for each field).
    id = property(lambda self: self.sync.id)
    tube = property(lambda self: self.sync.tube)
    body = property(lambda self: self.sync.body)
    priority = property(lambda self: self.sync.priority)
    ttr = property(lambda self: self.sync.ttr)
    state = property(lambda self: self.sync.state)
    reserves = property(lambda self: self.sync.reserves)
    timeouts = property(lambda self: self.sync.timeouts)
    releases = property(lambda self: self.sync.releases)
    buries = property(lambda self: self.sync.buries)
    kicks = property(lambda self: self.sync.kicks)
    lease = property(lambda self: self.sync.lease)
    created_at = property(lambda self: self.sync.created_at)
    delay_until = property(lambda self: self.sync.delay_until)
    reserved_until = property(lambda self: self.sync.reserved_until)
    bury_reason = property(lambda self: self.sync.bury_reason)
    unique_key = property(lambda self: self.sync.unique_key)

    def json(self) -> Any:
        """The body decoded as JSON."""
        return self.sync.json()

    def text(self) -> str:
        """The body decoded as UTF-8."""
        return self.sync.text()

    async def delete(self) -> None:
        """:meth:`sqlq.Job.delete`, awaited."""
        await self._aq._call(self.sync.delete)

    async def release(self, priority: int | None = None, delay: float = 0) -> None:
        """:meth:`sqlq.Job.release`, awaited."""
        await self._aq._call(lambda: self.sync.release(priority, delay), pokes=True)

    async def bury(self, priority: int | None = None, reason: str | None = None) -> None:
        """:meth:`sqlq.Job.bury`, awaited."""
        await self._aq._call(lambda: self.sync.bury(priority, reason), pokes=True)

    async def touch(self) -> None:
        """:meth:`sqlq.Job.touch`, awaited."""
        await self._aq._call(self.sync.touch)

    async def complete(self, result: bytes | str = b"") -> None:
        """:meth:`sqlq.Job.complete`, awaited."""
        await self._aq._call(lambda: self.sync.complete(result), pokes=True)


def _sync_jobs(jobs: Any) -> Any:
    """A batch's AsyncJobs as their Jobs; anything else as given (the Queue says what is
    wrong with it)."""
    if isinstance(jobs, Iterable) and not isinstance(jobs, (str, bytes, Job)):
        return [job.sync if isinstance(job, AsyncJob) else job for job in jobs]
    return jobs


class AsyncQueue:
    """The :class:`~sqlq.Queue`'s verbs as coroutines, with the same names, arguments,
    errors and semantics (they run the Queue's own code in a thread of this AsyncQueue).

    Args:
        path: what :class:`~sqlq.Queue` takes (a file path or a ``postgresql://`` URL),
            or an open Queue to wrap (it stays the caller's to close).
        **options: the Queue's keyword arguments (``durability``, ``result_ttl``...).

    Nothing is opened until first used (or ``async with``): constructing one in a
    module or a framework's startup never blocks the loop.

    Examples:
        >>> async with sqlq.AsyncQueue("app.db") as aq:
        ...     jid = await aq.put(b"hello", tube="emails")
        ...     job = await aq.reserve("emails", timeout=5)
        ...     await job.delete()
    """

    def __init__(self, path: str | os.PathLike[str] | Queue | None = None,
                 **options: Any) -> None:
        self._queue: Queue | None = path if isinstance(path, Queue) else None
        self._owns = self._queue is None
        self._path = None if isinstance(path, Queue) else path
        self._options = options
        if self._queue is not None and options:
            raise TypeError("options apply when AsyncQueue opens the Queue, not to an open one")
        self._executor = ThreadPoolExecutor(1, thread_name_prefix="sqlq-async")
        self._opening: asyncio.Lock | None = None
        self._closed = False
        self._waiting = Waiters(self)

    # -- life --------------------------------------------------------------------------------

    @property
    def queue(self) -> Queue:
        """The synchronous Queue underneath (opened by ``async with`` or the first call)."""
        if self._queue is None:
            raise Error("the AsyncQueue is not open yet: use `async with` or await a verb first")
        return self._queue

    async def _opened(self) -> Queue:
        if self._closed:
            raise Error("the AsyncQueue is closed")
        if self._queue is not None:
            return self._queue
        if self._opening is None:
            self._opening = asyncio.Lock()
        async with self._opening:
            if self._queue is None:
                path, options = self._path, self._options
                self._queue = await self._call(lambda: Queue(path, **options))
        return self._queue

    async def open(self) -> AsyncQueue:
        """Open the Queue now (``async with`` does); return self."""
        await self._opened()
        return self

    async def close(self) -> None:
        """Stop the waiters (they raise :class:`~sqlq.Error`) and close the Queue if this
        AsyncQueue opened it (its reservations are given back, as ``Queue.close`` does)."""
        if self._closed:
            return
        self._closed = True
        await self._waiting.close()
        queue = self._queue
        if queue is not None and self._owns:
            await self._call(queue.close)
        self._executor.shutdown(wait=False)

    async def __aenter__(self) -> AsyncQueue:
        return await self.open()

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    def __repr__(self) -> str:
        where = self._queue.location if self._queue is not None else self._path
        return f"<sqlq.AsyncQueue {where!r}>"

    # -- running the Queue's code off the loop -----------------------------------------------

    async def _call(self, fn: Callable[[], T], *, claims: bool = False,
                    pokes: bool = False) -> T:
        """``fn()`` in this AsyncQueue's thread (or its open transaction's), awaited.

        Cancelling the caller does not stop a call already running (one still queued
        behind others is dropped); ``claims``: a job it reserves anyway is released.
        ``pokes``: the call may make a job ready or final, so this process's waiters
        look at once (no need to hear the commit).
        """
        executor = _tx_executor(self) or self._executor
        try:
            future = asyncio.get_running_loop().run_in_executor(executor, fn)
        except RuntimeError:
            # The executor is shut down: close() ran while this call's caller (a waiter
            # between two steps, a verb racing the close) was on its way here.
            if self._closed:
                raise Error("the AsyncQueue is closed") from None
            raise
        if not claims:
            value = await future
        else:
            try:
                value = await asyncio.shield(future)
            except asyncio.CancelledError:
                future.add_done_callback(self._give_back_claim)
                raise
        if pokes and self._waiting:
            self._waiting.poke(Events(commit=True))
        return value

    def _give_back_claim(self, future: asyncio.Future[Any]) -> None:
        if future.cancelled() or future.exception() is not None:
            return
        value = future.result()
        job = value[0] if isinstance(value, tuple) else value
        if isinstance(job, Job) or (isinstance(job, list) and job):
            self._waiting.give_back(job)

    # -- put ---------------------------------------------------------------------------------

    async def put(self, body: bytes | str, *, tube: str = DEFAULT_TUBE,
                  priority: int = DEFAULT_PRIORITY, delay: float = 0, ttr: float = DEFAULT_TTR,
                  unique_key: str | None = None) -> int:
        """:meth:`sqlq.Queue.put`, awaited: the job's id."""
        q = await self._opened()
        return await self._call(lambda: q.put(body, tube=tube, priority=priority, delay=delay,
                                              ttr=ttr, unique_key=unique_key), pokes=True)

    async def put_many(self, bodies: Iterable[bytes | str], *, tube: str = DEFAULT_TUBE,
                       priority: int = DEFAULT_PRIORITY, delay: float = 0,
                       ttr: float = DEFAULT_TTR) -> list[int]:
        """:meth:`sqlq.Queue.put_many`, awaited: the ids, in order."""
        q = await self._opened()
        return await self._call(lambda: q.put_many(bodies, tube=tube, priority=priority,
                                                   delay=delay, ttr=ttr), pokes=True)

    async def put_task(self, task: Task[Any, Any, Any] | TaskOptions[Any, Any], /, *args: Any,
                       **kwargs: Any) -> int:
        """Enqueue a call of a ``@q.task`` (or ``task.options(...)``) in this queue's
        database: ``await aq.put_task(send_email, "a@example.com")``; the job's id."""
        from .work.tasks import TaskOptions

        options = task if isinstance(task, TaskOptions) else task.options()
        body = options.task.message(*args, **kwargs)
        return await self.put(body, tube=options.tube, priority=options.priority,
                              delay=options.delay, ttr=options.ttr,
                              unique_key=options.unique_key)

    async def publish(self, topic: str, body: bytes | str, **options: Any) -> list[int]:
        """:meth:`sqlq.Queue.publish`, awaited."""
        q = await self._opened()
        return await self._call(lambda: q.publish(topic, body, **options), pokes=True)

    # -- reserve and result: the waiting verbs -----------------------------------------------

    async def reserve(self, tubes: str | Sequence[str] | None = None,
                      timeout: float | None = None, *, delete: AsyncJob | Job | None = None,
                      detach: bool = False) -> AsyncJob | None:
        """:meth:`sqlq.Queue.reserve`, awaited; waiting costs no thread.

        Cancelling it leaves no lease behind: a job claimed as it was cancelled goes
        to another waiter or back to the queue.
        """
        q = await self._opened()
        deadline = timeout_deadline(timeout)
        sync_delete = delete.sync if isinstance(delete, AsyncJob) else delete

        def first() -> tuple[Job | None, Any, str | None]:
            try:
                job = q.reserve(tubes, 0, delete=sync_delete, detach=detach)
            except Disconnected:
                if sync_delete is not None or timeout == 0:
                    raise
                job = None  # waited through, as Queue.reserve does
            if job is not None or timeout == 0:
                return job, None, None
            # "": a token the looks fetch (and the backend confirms) each time
            return None, q.engine.tubes(tubes), None if detach else ""

        job, tubes_param, owner = await self._call(first, claims=True, pokes=delete is not None)
        if job is None and timeout != 0:
            key = ("reserve", tuple(check_tubes(tubes)), owner)
            job = await self._waiting.wait(Waiter(
                key, lambda events: q.engine.look(tubes_param, owner, events),
                lambda: q.engine.due(tubes_param)), deadline)
        return None if job is None else AsyncJob(self, job)

    async def reserve_many(self, n: int, tubes: str | Sequence[str] | None = None,
                           timeout: float | None = None, *,
                           delete: Iterable[AsyncJob | Job] | None = None) -> list[AsyncJob]:
        """:meth:`sqlq.Queue.reserve_many`, awaited; waiting costs no thread. Cancelling
        it leaves no lease behind (a batch claimed as it was cancelled goes back)."""
        q = await self._opened()
        deadline = timeout_deadline(timeout)
        sync_delete = _sync_jobs(delete)

        def first() -> tuple[list[Job], Any, str | None]:
            try:
                jobs = q.reserve_many(n, tubes, 0, delete=sync_delete)
            except Disconnected:
                if sync_delete or timeout == 0:
                    raise
                jobs = []  # waited through, as Queue.reserve_many does
            if jobs or timeout == 0:
                return jobs, None, None
            return [], q.engine.tubes(tubes), ""

        jobs, tubes_param, owner = await self._call(first, claims=True,
                                                    pokes=delete is not None)
        if not jobs and timeout != 0:
            count = check_batch_size(n)
            key = ("reserve_many", count, tuple(check_tubes(tubes)), owner)
            jobs = await self._waiting.wait(Waiter(
                key, lambda events: q.engine.look_many(tubes_param, count, events),
                lambda: q.engine.due(tubes_param)), deadline) or []
        return [AsyncJob(self, job) for job in jobs]

    async def delete_many(self, jobs: Iterable[AsyncJob | Job]) -> None:
        """:meth:`sqlq.Queue.delete_many`, awaited."""
        q = await self._opened()
        sync = _sync_jobs(jobs)
        await self._call(lambda: q.delete_many(sync))

    async def result(self, job_id: int, timeout: float | None = None) -> bytes:
        """:meth:`sqlq.Queue.result`, awaited; waiting costs no thread.

        Raises:
            JobBuried: the job was buried (``.reason`` says why).
            Timeout: no result within ``timeout`` seconds.
            JobNotFound: no such id was issued, or its result expired, or the job was
                deleted without a result.
        """
        q = await self._opened()
        check_job_id(job_id)
        deadline = timeout_deadline(timeout)

        def look(events: Events) -> bytes | None:
            return results.look(q.backend, q.engine.clock, job_id)

        found = await self._call(lambda: look(Events()))
        if found is None and timeout != 0:
            found = await self._waiting.wait(Waiter(("result", job_id), look), deadline)
        if found is None:
            raise Timeout(f"job {job_id}: no result within {timeout:g} s")
        return found

    async def jobs(self, tubes: str | Sequence[str] | None = None, *,
                   timeout: float | None = None) -> AsyncIterator[AsyncJob]:
        """Reserve jobs one after another: ``async for job in aq.jobs(tubes=["emails"])``.

        Ends when no job came within ``timeout`` (None: never). The loop's body deletes,
        completes, releases or buries each job; one it left reserved when the loop is
        closed (``break``, an exception, ``aclose()``) is released.

        Note:
            ``Queue.jobs(tube, state)`` (a page of the dashboard's job list) is
            :meth:`job_page` here.
        """
        while True:
            job = await self.reserve(tubes, timeout)
            if job is None:
                return
            try:
                yield job
            finally:
                if job.state == "reserved" and not self._closed:
                    with contextlib.suppress(JobLost, JobNotFound):
                        await job.release()

    # -- transactions ------------------------------------------------------------------------

    @contextlib.asynccontextmanager
    async def transaction(self) -> AsyncIterator[AsyncTransaction]:
        """:meth:`sqlq.Queue.transaction`, awaited: ``async with aq.transaction() as tx``.

        The transaction runs in a thread of its own while it is open; this task's
        calls of this AsyncQueue (``aq.put`` as well as ``tx.put``) join it, as the
        Queue's calls on the thread holding a transaction do. Other tasks' calls
        wait for its commit, as other threads' do.
        """
        q = await self._opened()
        outer = _tx_executor(self)
        nested = outer is not None
        executor = outer or ThreadPoolExecutor(1, thread_name_prefix="sqlq-async-tx")
        loop = asyncio.get_running_loop()
        manager = q.transaction()
        try:
            tx = await loop.run_in_executor(executor, manager.__enter__)
            token = _open_tx.set((self, executor, asyncio.current_task()))
            try:
                yield AsyncTransaction(self, tx)
            except BaseException as exc:
                _open_tx.reset(token)
                if not await loop.run_in_executor(executor, manager.__exit__, type(exc), exc,
                                                  exc.__traceback__):
                    raise
            else:
                _open_tx.reset(token)
                await loop.run_in_executor(executor, manager.__exit__, None, None, None)
                if self._waiting:
                    self._waiting.poke(Events(commit=True))
        finally:
            if not nested:
                executor.shutdown(wait=False)

    # -- verbs on jobs by id, and observers: the Queue's, awaited -----------------------------

    async def _run(self, method: str, *args: Any, pokes: bool = False, **kwargs: Any) -> Any:
        q = await self._opened()
        return await self._call(lambda: getattr(q, method)(*args, **kwargs), pokes=pokes)

    async def try_reserve(self, tubes: str | Sequence[str] | None = None) -> AsyncJob | None:
        """:meth:`sqlq.Queue.try_reserve`, awaited: one claim attempt, no waiting."""
        q = await self._opened()
        job = await self._call(lambda: q.try_reserve(tubes), claims=True)
        return None if job is None else AsyncJob(self, job)

    async def reserve_job(self, job_id: int) -> AsyncJob:
        """:meth:`sqlq.Queue.reserve_job`, awaited."""
        return AsyncJob(self, await self._run("reserve_job", job_id))

    async def delete(self, job_id: int, *, lease: int | None = None) -> None:
        """:meth:`sqlq.Queue.delete`, awaited."""
        await self._run("delete", job_id, lease=lease)

    async def release(self, job_id: int, *, priority: int | None = None, delay: float = 0,
                      lease: int | None = None) -> None:
        """:meth:`sqlq.Queue.release`, awaited."""
        await self._run("release", job_id, priority=priority, delay=delay, lease=lease,
                        pokes=True)

    async def bury(self, job_id: int, *, priority: int | None = None, reason: str | None = None,
                   lease: int | None = None) -> None:
        """:meth:`sqlq.Queue.bury`, awaited."""
        await self._run("bury", job_id, priority=priority, reason=reason, lease=lease,
                        pokes=True)

    async def touch(self, job_id: int, *, lease: int | None = None) -> int:
        """:meth:`sqlq.Queue.touch`, awaited: the new deadline in ms."""
        value: int = await self._run("touch", job_id, lease=lease)
        return value

    async def complete(self, job_id: int, result: bytes | str = b"", *,
                       lease: int | None = None) -> None:
        """:meth:`sqlq.Queue.complete`, awaited."""
        await self._run("complete", job_id, result, lease=lease, pokes=True)

    async def kick(self, bound: int, tube: str = DEFAULT_TUBE) -> int:
        """:meth:`sqlq.Queue.kick`, awaited: how many were kicked."""
        value: int = await self._run("kick", bound, tube, pokes=True)
        return value

    async def kick_job(self, job_id: int) -> None:
        """:meth:`sqlq.Queue.kick_job`, awaited."""
        await self._run("kick_job", job_id, pokes=True)

    async def pause_tube(self, tube: str, seconds: float) -> None:
        """:meth:`sqlq.Queue.pause_tube`, awaited."""
        await self._run("pause_tube", tube, seconds, pokes=True)

    async def subscribe(self, topic: str, tube: str) -> None:
        """:meth:`sqlq.Queue.subscribe`, awaited."""
        await self._run("subscribe", topic, tube)

    async def unsubscribe(self, topic: str, tube: str) -> bool:
        """:meth:`sqlq.Queue.unsubscribe`, awaited."""
        value: bool = await self._run("unsubscribe", topic, tube)
        return value

    async def subscriptions(self, topic: str | None = None) -> list[tuple[str, str]]:
        """:meth:`sqlq.Queue.subscriptions`, awaited."""
        value: list[tuple[str, str]] = await self._run("subscriptions", topic)
        return value

    async def _peek(self, method: str, *args: Any) -> AsyncJob | None:
        job: Job | None = await self._run(method, *args)
        return None if job is None else AsyncJob(self, job)

    async def peek(self, job_id: int) -> AsyncJob | None:
        """:meth:`sqlq.Queue.peek`, awaited."""
        return await self._peek("peek", job_id)

    async def peek_ready(self, tube: str = DEFAULT_TUBE) -> AsyncJob | None:
        """:meth:`sqlq.Queue.peek_ready`, awaited."""
        return await self._peek("peek_ready", tube)

    async def peek_delayed(self, tube: str = DEFAULT_TUBE) -> AsyncJob | None:
        """:meth:`sqlq.Queue.peek_delayed`, awaited."""
        return await self._peek("peek_delayed", tube)

    async def peek_buried(self, tube: str = DEFAULT_TUBE) -> AsyncJob | None:
        """:meth:`sqlq.Queue.peek_buried`, awaited."""
        return await self._peek("peek_buried", tube)

    async def has_ready(self, tubes: str | Sequence[str] | None = None) -> bool:
        """:meth:`sqlq.Queue.has_ready`, awaited."""
        value: bool = await self._run("has_ready", tubes)
        return value

    async def next_wakeup(self, tubes: str | Sequence[str] | None = None) -> float | None:
        """:meth:`sqlq.Queue.next_wakeup`, awaited."""
        value: float | None = await self._run("next_wakeup", tubes)
        return value

    async def tubes(self) -> list[str]:
        """:meth:`sqlq.Queue.tubes`, awaited."""
        value: list[str] = await self._run("tubes")
        return value

    async def stats(self) -> dict[str, Any]:
        """:meth:`sqlq.Queue.stats`, awaited."""
        value: dict[str, Any] = await self._run("stats")
        return value

    async def stats_tube(self, tube: str) -> dict[str, Any]:
        """:meth:`sqlq.Queue.stats_tube`, awaited."""
        value: dict[str, Any] = await self._run("stats_tube", tube)
        return value

    async def stats_job(self, job_id: int) -> dict[str, Any]:
        """:meth:`sqlq.Queue.stats_job`, awaited."""
        value: dict[str, Any] = await self._run("stats_job", job_id)
        return value

    async def attempts(self, job_id: int) -> list[Attempt]:
        """:meth:`sqlq.Queue.attempts` (a job's failed runs, with tracebacks), awaited."""
        value: list[Attempt] = await self._run("attempts", job_id)
        return value

    async def overview(self) -> observe.Overview:
        """:meth:`sqlq.Queue.overview`, awaited."""
        value: observe.Overview = await self._run("overview")
        return value

    async def job_page(self, tube: str, state: str, *, after: tuple[int, int] | None = None,
                       limit: int = 50) -> list[observe.JobSummary]:
        """:meth:`sqlq.Queue.jobs` (a page of a tube's jobs in one state), awaited."""
        value: list[observe.JobSummary] = await self._run("jobs", tube, state, after=after,
                                                          limit=limit)
        return value

    async def tube_summary(self, tube: str) -> observe.TubeSummary:
        """:meth:`sqlq.Queue.tube_summary`, awaited."""
        value: observe.TubeSummary = await self._run("tube_summary", tube)
        return value

    async def search(self, tube: str, text: str, *, limit: int = 50
                     ) -> list[observe.JobSummary]:
        """:meth:`sqlq.Queue.search`, awaited."""
        value: list[observe.JobSummary] = await self._run("search", tube, text, limit=limit)
        return value

    async def workers(self) -> list[observe.Worker]:
        """:meth:`sqlq.Queue.workers`, awaited."""
        value: list[observe.Worker] = await self._run("workers")
        return value

    async def periodic_slots(self) -> list[observe.PeriodicSlot]:
        """:meth:`sqlq.Queue.periodic_slots`, awaited."""
        value: list[observe.PeriodicSlot] = await self._run("periodic_slots")
        return value

    async def kept_result(self, job_id: int) -> bytes | None:
        """:meth:`sqlq.Queue.kept_result`, awaited."""
        value: bytes | None = await self._run("kept_result", job_id)
        return value


class AsyncTransaction:
    """What ``async with aq.transaction() as tx`` hands out: SQL and puts in one commit."""

    def __init__(self, aq: AsyncQueue, tx: Transaction) -> None:
        self.queue = aq
        self.sync = tx

    async def execute(self, sql: str,
                      params: Sequence[Any] | dict[str, Any] = ()) -> list[tuple[Any, ...]]:
        """:meth:`sqlq.Transaction.execute`, awaited."""
        return await self.queue._call(lambda: self.sync.execute(sql, params))

    async def put(self, body: bytes | str, **options: Any) -> int:
        """:meth:`sqlq.Transaction.put`, awaited."""
        return await self.queue._call(lambda: self.sync.put(body, **options))

    async def put_many(self, bodies: Iterable[bytes | str], **options: Any) -> list[int]:
        """:meth:`sqlq.Transaction.put_many`, awaited."""
        return await self.queue._call(lambda: self.sync.put_many(bodies, **options))

    async def publish(self, topic: str, body: bytes | str, **options: Any) -> list[int]:
        """:meth:`sqlq.Transaction.publish`, awaited."""
        return await self.queue._call(lambda: self.sync.publish(topic, body, **options))
