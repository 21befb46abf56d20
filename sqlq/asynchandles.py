"""The async handles of a reserved job and of a transaction (:class:`AsyncJob`,
:class:`AsyncTransaction`): each holds the synchronous object (``sync``) and the
AsyncQueue (``aq``), and awaits the object's verbs in the AsyncQueue's thread. Apart
from asyncq.py, which makes them, so that the queue's module stays the queue."""

from __future__ import annotations

import functools
import inspect
import operator
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, Concatenate, ParamSpec, Protocol, TypeVar

from .facade.puts import Transaction
from .model import JOB_FIELDS, Job
from .steps import MISSING, STEP, check_name, lease_of
from .verbs import WAKES

P = ParamSpec("P")
R = TypeVar("R")
T = TypeVar("T")


class InThread(Protocol):
    """What a handle asks of its AsyncQueue: the thread its verbs run in
    (:meth:`AsyncQueue.call_in_thread <sqlq.AsyncQueue.call_in_thread>`). Named here, so
    the handles stand below the AsyncQueue that makes them."""

    def call_in_thread(self, fn: Callable[[], T], *, claims: bool = False,
                       pokes: bool = False) -> Awaitable[T]: ...


class _HoldsSync(Protocol):
    """An async handle of a synchronous object (AsyncJob, AsyncTransaction)."""

    @property
    def aq(self) -> InThread: ...

    @property
    def sync(self) -> Any: ...


def sync_verb(verb: Callable[Concatenate[Any, P], R], *, commits: bool = True
               ) -> Callable[Concatenate[_HoldsSync, P], Coroutine[Any, Any, R]]:
    """The verb of a handle's synchronous object (``self.sync``: a Job, a Transaction) as
    a coroutine method of the async handle: the same signature, run in the
    AsyncQueue's thread (see :func:`awaited`). ``commits``: False for a transaction's,
    whose waking is its commit's."""
    pokes = commits and bool(WAKES.get(verb.__name__))

    @functools.wraps(verb)
    async def call(self: _HoldsSync, /, *args: P.args, **kwargs: P.kwargs) -> R:
        sync = self.sync
        return await self.aq.call_in_thread(lambda: verb(sync, *args, **kwargs), pokes=pokes)

    owner = verb.__qualname__
    call.__qualname__ = f"Async{owner}"
    call.__module__ = __name__  # documented here (functools.wraps copied the verb's)
    call.__doc__ = f":meth:`sqlq.{owner}`, awaited.\n\n{inspect.getdoc(verb) or ''}"
    return call


class AsyncJob:
    """A reserved (or peeked) job: the :class:`~sqlq.Job`'s fields, its verbs awaited.

    ``job.sync`` is the Job itself (for code that runs in a thread); ``job.aq`` the
    AsyncQueue it came from.
    """

    __slots__ = ("aq", "sync")

    # The record, read through from the Job (see Job for each field). The properties
    # are made from Job's own fields below: these annotations are for type checkers,
    # and tests/unit/test_async_parity.py fails if they differ from Job's.
    id: int
    tube: str
    body: bytes
    priority: int
    ttr: float
    state: str
    reserves: int
    timeouts: int
    releases: int
    buries: int
    kicks: int
    lease: int | None
    created_at: int
    delay_until: int | None
    reserved_until: int | None
    bury_reason: str | None
    unique_key: str | None
    delay: float
    trace: str | None
    group: str | None

    def __init__(self, aq: InThread, job: Job) -> None:
        self.aq = aq
        self.sync = job

    def __repr__(self) -> str:
        return repr(self.sync)

    def json(self) -> Any:
        """The body decoded as JSON."""
        return self.sync.json()

    def text(self) -> str:
        """The body decoded as UTF-8."""
        return self.sync.text()

    delete = sync_verb(Job.delete)
    release = sync_verb(Job.release)
    bury = sync_verb(Job.bury)
    touch = sync_verb(Job.touch)
    progress = sync_verb(Job.progress)
    complete = sync_verb(Job.complete)
    cursor = sync_verb(Job.cursor)
    save_cursor = sync_verb(Job.save_cursor)
    snooze = sync_verb(Job.snooze)

    async def step(self, name: str, fn: Callable[..., T], /, *args: Any, conn: Any = None,
                   **kwargs: Any) -> Any:
        """:meth:`sqlq.Job.step`, awaited: an ``async def`` fn is awaited on this loop (a
        plain one is called here too), its value recorded in the AsyncQueue's thread.
        With ``conn`` (a plain function), the step runs in that thread, in the
        transaction on ``conn``.

        Examples:
            >>> receipt = await job.step("charge", payments.charge, order_id)
        """
        sync = self.sync
        if conn is not None:
            return await self.aq.call_in_thread(
                lambda: sync.step(name, fn, *args, conn=conn, **kwargs))
        checked = check_name(name)
        lease_of(sync)
        found = await self.aq.call_in_thread(lambda: sync._recorded(STEP, checked, room=True))
        if found is not MISSING:
            return found
        value = fn(*args, **kwargs)
        if inspect.isawaitable(value):
            value = await value
        return await self.aq.call_in_thread(lambda: sync._keep(STEP, checked, value))

    @property
    def steps(self) -> list[dict[str, Any]]:
        """The Job's ``steps`` (loaded in the calling thread if no step was awaited yet)."""
        return self.sync.steps


def _read_through(name: str) -> property:
    return property(operator.attrgetter(f"sync.{name}"), doc=f"The Job's ``{name}``.")


for _field in JOB_FIELDS:
    setattr(AsyncJob, _field, _read_through(_field))


class AsyncTransaction:
    """What ``async with aq.transaction() as tx`` hands out: SQL and puts in one commit."""

    def __init__(self, aq: InThread, tx: Transaction) -> None:
        self.queue = aq
        self.sync = tx

    @property
    def aq(self) -> InThread:
        """The AsyncQueue (``queue``, as :class:`~sqlq.Transaction` names its Queue)."""
        return self.queue

    execute = sync_verb(Transaction.execute, commits=False)
    put = sync_verb(Transaction.put, commits=False)
    put_many = sync_verb(Transaction.put_many, commits=False)
    publish = sync_verb(Transaction.publish, commits=False)
