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
import functools
import inspect
import logging
import os
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any, Concatenate, ParamSpec, TypeVar, overload

from . import control
from .asynchandles import AsyncJob, AsyncTransaction
from .asyncwait import Waiter, Waiters
from .backends import Events
from .backends.base import Durability
from .core import tracing
from .errors import Disconnected, Error, JobLost, JobNotFound, Timeout
from .model import (
    Job,
    check_batch_size,
    check_job_id,
    check_tubes,
)
from .queue import Queue
from .verbs import WAKES
from .verbs.operations import ProgressWatch
from .verbs.views import Views
from .verbs.waiting import timeout_deadline

if TYPE_CHECKING:
    from .tasks.task import Task, TaskOptions

T = TypeVar("T")
R = TypeVar("R")
P = ParamSpec("P")
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


def awaited(verb: Callable[Concatenate[Any, P], R]
            ) -> Callable[Concatenate[AsyncQueue, P], Coroutine[Any, Any, R]]:
    """The Queue's ``verb`` as a coroutine method of AsyncQueue: the same signature (the
    one definition, read by ``inspect.signature``, mypy and the docs), run in the
    AsyncQueue's thread. Whether this process's waiters look at once after it is the
    verb's record's to say (``verbs.WAKES``)."""
    name = verb.__name__
    pokes = bool(WAKES.get(name))

    @functools.wraps(verb)
    async def call(self: AsyncQueue, /, *args: P.args, **kwargs: P.kwargs) -> R:
        # By name: an open Queue of a subclass that overrides the verb is obeyed.
        method: Callable[P, R] = getattr(await self._opened(), name)
        return await self.call_in_thread(lambda: method(*args, **kwargs), pokes=pokes)

    call.__qualname__ = f"AsyncQueue.{name}"
    call.__module__ = __name__  # documented here (functools.wraps copied the verb's)
    call.__doc__ = f":meth:`sqlq.Queue.{name}`, awaited.\n\n{inspect.getdoc(verb) or ''}"
    return call


@overload
def awaited_job(verb: Callable[Concatenate[Any, P], Job]
                ) -> Callable[Concatenate[AsyncQueue, P], Coroutine[Any, Any, AsyncJob]]: ...


@overload
def awaited_job(verb: Callable[Concatenate[Any, P], Job | None]
                ) -> Callable[Concatenate[AsyncQueue, P], Coroutine[Any, Any, AsyncJob | None]]: ...


def awaited_job(verb: Callable[Concatenate[Any, P], Job | None]
                ) -> Callable[Concatenate[AsyncQueue, P], Coroutine[Any, Any, AsyncJob | None]]:
    """:func:`awaited` for a verb returning a Job (or None): an AsyncJob (or None)."""
    call = awaited(verb)

    @functools.wraps(call)
    async def wrapped(self: AsyncQueue, /, *args: P.args, **kwargs: P.kwargs
                      ) -> AsyncJob | None:
        job = await call(self, *args, **kwargs)
        return None if job is None else AsyncJob(self, job)

    return wrapped


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
                self._queue = await self.call_in_thread(lambda: Queue(path, **options))
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
            await self.call_in_thread(queue.close)
        self._executor.shutdown(wait=False)

    async def __aenter__(self) -> AsyncQueue:
        return await self.open()

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    def __repr__(self) -> str:
        where = self._queue.location if self._queue is not None else self._path
        return f"<sqlq.AsyncQueue {where!r}>"

    # -- running the Queue's code off the loop -----------------------------------------------

    def call_in_thread(self, fn: Callable[[], T], *, claims: bool = False,
                       pokes: bool = False) -> Awaitable[T]:
        """``fn()`` in this AsyncQueue's thread (or its open transaction's), to await: for
        code built on sqlq that runs several of the Queue's calls in one go (the async
        worker). Every verb of this class is a call of this. The call is queued for the
        thread before this returns (calls run in the order they were made).

        Cancelling the awaiting caller does not stop a call already running (one still
        queued behind others is dropped); ``claims``: a job it reserves anyway is
        released. ``pokes``: the call may make a job ready or final, so this process's
        waiters look at once (no need to hear the commit).
        """
        executor = _tx_executor(self) or self._executor
        if tracing.INSTALLED and tracing.active():
            fn = tracing.in_context(fn)  # the thread runs it in the caller's span
        try:
            future = asyncio.get_running_loop().run_in_executor(executor, fn)
        except RuntimeError:
            # The executor is shut down: close() ran while this call's caller (a waiter
            # between two steps, a verb racing the close) was on its way here.
            if self._closed:
                raise Error("the AsyncQueue is closed") from None
            raise
        if not (claims or pokes):
            return future
        return self._settled(future, claims, pokes)

    async def _settled(self, future: asyncio.Future[T], claims: bool, pokes: bool) -> T:
        """A call's result, with what ``claims`` and ``pokes`` ask (see call_in_thread)."""
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

    put = awaited(Queue.put)
    put_many = awaited(Queue.put_many)
    publish = awaited(Queue.publish)

    async def put_task(self, task: Task[Any, Any, Any] | TaskOptions[Any, Any], /, *args: Any,
                       **kwargs: Any) -> int:
        """Enqueue a call of a ``@q.task`` (or ``task.options(...)``) in this queue's
        database: ``await aq.put_task(send_email, "a@example.com")``; the job's id."""
        from .tasks.task import TaskOptions

        options = task if isinstance(task, TaskOptions) else task.options()
        body = options.task.message(*args, **kwargs)
        return await self.put(body, tube=options.tube, priority=options.priority,
                              delay=options.delay, ttr=options.ttr,
                              unique_key=options.unique_key, after=options.after or None,
                              on_conflict=options.on_conflict, group=options.group)

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

        job, tubes_param, owner = await self.call_in_thread(
            first, claims=True, pokes=delete is not None and bool(WAKES["delete"]))
        if job is None and timeout != 0:
            key = ("reserve", tuple(check_tubes(tubes)), owner)
            job = await self._waiting.wait(Waiter(
                key, lambda events: q.engine.look(tubes_param, owner, events),
                functools.partial(q.engine.due, tubes_param)), deadline)
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

        jobs, tubes_param, owner = await self.call_in_thread(
            first, claims=True, pokes=bool(delete) and bool(WAKES["delete_many"]))
        if not jobs and timeout != 0:
            count = check_batch_size(n)
            key = ("reserve_many", count, tuple(check_tubes(tubes)), owner)
            jobs = await self._waiting.wait(Waiter(
                key, lambda events: q.engine.look_many(tubes_param, count, events),
                functools.partial(q.engine.due, tubes_param)), deadline) or []
        return [AsyncJob(self, job) for job in jobs]

    async def delete_many(self, jobs: Iterable[AsyncJob | Job]) -> None:
        """:meth:`sqlq.Queue.delete_many`, awaited."""
        q = await self._opened()
        sync = _sync_jobs(jobs)
        await self.call_in_thread(lambda: q.delete_many(sync))

    async def result(self, job_id: int, timeout: float | None = None, *,
                     on_progress: Callable[[control.Progress, str], Any] | None = None
                     ) -> bytes:
        """:meth:`sqlq.Queue.result`, awaited; waiting costs no thread. ``on_progress``
        is called on the event loop.

        Raises:
            JobBuried: the job was buried (``.reason`` says why).
            Timeout: no result within ``timeout`` seconds.
            JobNotFound: no such id was issued, or its result expired, or the job was
                deleted without a result.
        """
        q = await self._opened()
        check_job_id(job_id)
        deadline = timeout_deadline(timeout)
        control.check_callback(on_progress)

        watch = None
        if on_progress is not None:
            loop = asyncio.get_running_loop()
            watch = ProgressWatch(q.operations, job_id, on_progress,
                                          lambda fn, *a: loop.call_soon_threadsafe(fn, *a))

        def look(events: Events) -> bytes | None:
            found = q.operations.look_result(job_id)
            if found is None and watch is not None:
                watch.look()
            return found

        found = await self.call_in_thread(lambda: look(Events()))
        if found is None and timeout != 0:
            # A waiter that reports progress looks on its own (its key is its own).
            key = ("result", job_id) if watch is None else ("result", job_id, id(watch))
            found = await self._waiting.wait(Waiter(key, look), deadline)
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

    # -- verbs on jobs by id, and observers: the Queue's, awaited ---------------------------

    @property
    def views(self) -> AsyncViews:
        """``Queue.views`` awaited: the reads of the dashboard and monitors
        (``await aq.views.overview()``)."""
        return AsyncViews(self)

    @property
    def durability(self) -> Durability:
        """The Queue's :attr:`~sqlq.Queue.durability` (once open)."""
        return self.queue.durability

    @property
    def location(self) -> str:
        """The Queue's :attr:`~sqlq.Queue.location` (once open)."""
        return self.queue.location

    reserve_job = awaited_job(Queue.reserve_job)
    delete = awaited(Queue.delete)
    release = awaited(Queue.release)
    bury = awaited(Queue.bury)
    touch = awaited(Queue.touch)
    cancel = awaited(Queue.cancel)
    progress = awaited(Queue.progress)
    complete = awaited(Queue.complete)
    kick = awaited(Queue.kick)
    kick_job = awaited(Queue.kick_job)
    postpone = awaited(Queue.postpone)
    pause_tube = awaited(Queue.pause_tube)
    backup = awaited(Queue.backup)
    subscribe = awaited(Queue.subscribe)
    unsubscribe = awaited(Queue.unsubscribe)
    subscriptions = awaited(Queue.subscriptions)
    peek = awaited_job(Queue.peek)
    peek_ready = awaited_job(Queue.peek_ready)
    peek_delayed = awaited_job(Queue.peek_delayed)
    peek_buried = awaited_job(Queue.peek_buried)
    tubes = awaited(Queue.tubes)
    stats = awaited(Queue.stats)
    stats_tube = awaited(Queue.stats_tube)
    limit = awaited(Queue.limit)
    limits = awaited(Queue.limits)
    stats_job = awaited(Queue.stats_job)
    links = awaited(Queue.links)
    attempts = awaited(Queue.attempts)
    finished = awaited(Queue.finished)
    retention = awaited(Queue.retention)
    retentions = awaited(Queue.retentions)
    prune = awaited(Queue.prune)
    job_page = awaited(Queue.job_page)
    workers = awaited(Queue.workers)
    failed_groups = awaited(Queue.failed_groups)
    failed_group_jobs = awaited(Queue.failed_group_jobs)
    throughput = awaited(Queue.throughput)
    job_trace = awaited(Queue.job_trace)
    horizon = awaited(Queue.horizon)


def awaited_read(read: Callable[Concatenate[Views, P], R]
                 ) -> Callable[Concatenate[AsyncViews, P], Coroutine[Any, Any, R]]:
    """``Views``' ``read`` as a coroutine method of AsyncViews (as :func:`awaited` does
    for the Queue's verbs: one signature, run in the AsyncQueue's thread)."""
    name = read.__name__

    @functools.wraps(read)
    async def call(self: AsyncViews, /, *args: P.args, **kwargs: P.kwargs) -> R:
        method: Callable[P, R] = getattr((await self.aq._opened()).views, name)
        return await self.aq.call_in_thread(lambda: method(*args, **kwargs))

    call.__qualname__ = f"AsyncViews.{name}"
    call.__module__ = __name__
    call.__doc__ = f":meth:`sqlq.verbs.Views.{name}`, awaited.\n\n{inspect.getdoc(read) or ''}"
    return call


class AsyncViews:
    """The read verbs of ``Queue.views``, awaited (``aq.views``), for async dashboards and
    monitors; a Job comes back as an AsyncJob."""

    __slots__ = ("aq",)

    def __init__(self, aq: AsyncQueue) -> None:
        self.aq = aq

    async def peek(self, job_id: int) -> AsyncJob | None:
        """:meth:`sqlq.verbs.Views.peek`, awaited."""
        job = await self._job(lambda views: views.peek(job_id))
        return None if job is None else AsyncJob(self.aq, job)

    async def peek_state(self, which: str, tube: str) -> AsyncJob | None:
        """:meth:`sqlq.verbs.Views.peek_state`, awaited."""
        job = await self._job(lambda views: views.peek_state(which, tube))
        return None if job is None else AsyncJob(self.aq, job)

    async def _job(self, read: Callable[[Views], Job | None]) -> Job | None:
        views = (await self.aq._opened()).views
        return await self.aq.call_in_thread(lambda: read(views))

    links = awaited_read(Views.links)
    tubes = awaited_read(Views.tubes)
    stats = awaited_read(Views.stats)
    steps = awaited_read(Views.steps)
    stats_tube = awaited_read(Views.stats_tube)
    tube_record = awaited_read(Views.tube_record)
    stats_job = awaited_read(Views.stats_job)
    next_change = awaited_read(Views.next_change)
    change_token = awaited_read(Views.change_token)
    overview = awaited_read(Views.overview)
    tube_summary = awaited_read(Views.tube_summary)
    job_page = awaited_read(Views.job_page)
    search = awaited_read(Views.search)
    workers = awaited_read(Views.workers)
    periodic_slots = awaited_read(Views.periodic_slots)
    kept_result = awaited_read(Views.kept_result)
    job_trace = awaited_read(Views.job_trace)
    duration_histograms = awaited_read(Views.duration_histograms)
    failed_groups = awaited_read(Views.failed_groups)
    failed_group_jobs = awaited_read(Views.failed_group_jobs)
    tube_groups = awaited_read(Views.tube_groups)
    horizon = awaited_read(Views.horizon)
    finished = awaited_read(Views.finished)
    finished_page = awaited_read(Views.finished_page)
    search_finished = awaited_read(Views.search_finished)
