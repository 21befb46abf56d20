"""Waiting without threads: the coroutines blocked in an AsyncQueue's reserve and result.

A waiting coroutine is a :class:`Waiter`, a future in a FIFO. One dispatcher task
per AsyncQueue watches the backend's notifier (its descriptor registered with
the loop: inotify on SQLite, the LISTEN reader's pipe on PostgreSQL) and, on
each wake-up, looks once per distinct request in arrival order, in the
AsyncQueue's thread, on the schedule of :class:`~sqlq.verbs.waiting.Pacer`: the
decisions the synchronous wait loop takes. A thousand coroutines waiting on one
tube cost one read per commit event, and each job is claimed for one of them.

A claim that finds its waiter gone (cancelled, or timed out a moment before) is
handed to the next waiter with the same request, or released: a cancelled
``reserve`` leaves no lease behind. The server's ``server/waiters.py`` does the
same for beanstalkd connections on its own selector loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Hashable
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from .backends import Events, Notifier
from .errors import Disconnected, Error, JobLost, JobNotFound
from .model import Job
from .verbs.waiting import Outage, Pacer

if TYPE_CHECKING:
    from .queue import Queue

T = TypeVar("T")


class Host(Protocol):
    """What the waiters need of their AsyncQueue: its Queue and its thread."""

    @property
    def queue(self) -> Queue: ...

    def call_in_thread(self, fn: Callable[[], T], *, claims: bool = False,
                       pokes: bool = False) -> Awaitable[T]: ...

#: The dispatcher looks by itself at least this often, whatever it heard (a lost
#: PostgreSQL notification costs this much at most, as in the synchronous loop).
MAX_SLEEP = 10.0
log = logging.getLogger("sqlq")
#: How often waiters look when the notifier has no descriptor (the polling fallback).
POLL_INTERVAL = 0.05


def _ignore_failure(future: asyncio.Future[Any]) -> None:
    """A give-back's release that failed (the AsyncQueue closed meanwhile): the job's
    lease runs out, or Queue.close gives it back; nothing to tell anyone."""
    if not future.cancelled():
        future.exception()


class Waiter:
    """A coroutine blocked in reserve or result: what to look for, and where to put it."""

    __slots__ = ("key", "look", "due", "future")

    def __init__(self, key: Hashable, look: Callable[[Events], Any],
                 due: Callable[[int], int | None] | None = None) -> None:
        self.key = key    # waiters with equal keys find the same thing: one empty look
        self.look = look  # serves them all; run in the AsyncQueue's thread. A Job it finds
        self.due = due    # for a waiter gone meanwhile goes to the next one, or back
        self.future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()


class Waiters:
    """The FIFO of an AsyncQueue's waiting coroutines and the task that serves them."""

    def __init__(self, host: Host) -> None:
        self._aq = host
        self._waiters: dict[Waiter, None] = {}  # in arrival order
        self._keys: Counter[Hashable] = Counter()
        self._dispatcher: asyncio.Task[None] | None = None
        self._notifier: Notifier | None = None
        self._wake: asyncio.Event | None = None
        self._events = Events()
        self._closed = False
        #: The database gone away, if the last pass's looks met a lost connection (the
        #: pause before the next pass), else None.
        self._lost: float | None = None
        self._outage = Outage()

    def __len__(self) -> int:
        return len(self._waiters)

    async def close(self) -> None:
        """End every wait (it raises :class:`~sqlq.Error`) and close the notifier."""
        self._closed = True
        for waiter in list(self._waiters):
            if not waiter.future.done():
                waiter.future.set_exception(Error("the AsyncQueue was closed"))
        if self._dispatcher is not None:
            self._dispatcher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._dispatcher
        if self._notifier is not None:
            await self._aq.call_in_thread(self._notifier.close)

    def give_back(self, job: Job | list[Job], key: Hashable | None = None) -> None:
        """A claimed job (or reserve_many's batch) nobody awaits: the next waiter with
        the same request gets it, or it goes back to the queue (a fire-and-forget
        release in the thread)."""
        if key is not None:
            for waiter in self._waiters:
                if waiter.key == key and not waiter.future.done():
                    waiter.future.set_result(job)
                    return

        def release() -> None:
            for each in job if isinstance(job, list) else [job]:
                with contextlib.suppress(JobLost, JobNotFound):
                    each.release()

        if self._closed:
            return  # no thread left: Queue.close (when ours) gives back this process's jobs
        # Fire and forget, queued now: the release runs in the AsyncQueue's thread
        # before any call made after this one.
        with contextlib.suppress(Error):
            released = asyncio.ensure_future(self._aq.call_in_thread(release))
            released.add_done_callback(_ignore_failure)

    async def wait(self, waiter: Waiter, deadline: float | None) -> Any:
        """Park ``waiter`` until the dispatcher fills its future or the deadline passes."""
        loop = asyncio.get_running_loop()
        timer = None
        if deadline is not None:
            def expire() -> None:
                if not waiter.future.done():
                    waiter.future.set_result(None)

            timer = loop.call_at(loop.time() + deadline - time.monotonic(), expire)
        new_key = self._keys[waiter.key] == 0
        self._waiters[waiter] = None
        self._keys[waiter.key] += 1
        if self._dispatcher is None:
            self._dispatcher = loop.create_task(self._dispatch(), name="sqlq-async-dispatch")
        elif new_key:
            self.poke(Events())  # its tubes may have another due time: look and re-arm
        try:
            return await waiter.future
        except asyncio.CancelledError:
            future = waiter.future
            if future.done() and not future.cancelled() and future.exception() is None:
                value = future.result()  # delivered as the caller was cancelled
                if isinstance(value, Job) or (isinstance(value, list) and value):
                    self.give_back(value, waiter.key)
            raise
        finally:
            if timer is not None:
                timer.cancel()
            del self._waiters[waiter]
            self._keys[waiter.key] -= 1
            if not self._keys[waiter.key]:
                del self._keys[waiter.key]

    # -- the dispatcher ----------------------------------------------------------------------

    def poke(self, events: Events) -> None:
        """Something may have changed: look now (``events.commit``: as for a commit)."""
        self._events.commit = self._events.commit or events.commit
        self._events.owner = self._events.owner or events.owner
        if self._wake is not None:
            self._wake.set()

    def _on_readable(self) -> None:
        assert self._notifier is not None
        events = self._notifier.drain()
        if events:  # writes of other files in the directory drain to nothing: sleep on
            self.poke(events)

    async def _dispatch(self) -> None:
        """Serve the waiters while there are any (see the module docstring). A failure
        (a database gone) is raised in every waiter, as the blocking loop raises it."""
        loop = asyncio.get_running_loop()
        self._wake = asyncio.Event()
        notifier: Notifier | None = None
        fd: int | None = None
        try:
            if self._notifier is None:
                backend = self._aq.queue.backend
                self._notifier = await self._aq.call_in_thread(backend.open_notifier)
            notifier = self._notifier
            await self._aq.call_in_thread(notifier.resume)  # watching from here: look once more
            fd = notifier.fileno()
            if fd is not None:
                loop.add_reader(fd, self._on_readable)
            await self._serve_while_waited(notifier, self._wake, polling=fd is None)
        except Exception as exc:  # noqa: BLE001 - the waiters raise it
            for waiter in self._waiters:
                if not waiter.future.done():
                    waiter.future.set_exception(exc)
        finally:
            if fd is not None:
                loop.remove_reader(fd)
            self._dispatcher = self._wake = None
            if notifier is not None and not self._closed:
                with contextlib.suppress(Error):
                    await self._aq.call_in_thread(notifier.pause)
            if not self._closed and self._dispatcher is None and any(
                    not waiter.future.done() for waiter in self._waiters):
                self._dispatcher = loop.create_task(self._dispatch())  # came as this one ended

    async def _serve_while_waited(self, notifier: Notifier, wake: asyncio.Event,
                                  polling: bool) -> None:
        pacer = Pacer(notifier)
        events = Events(commit=True, owner=True)  # the first look's (Pacer)
        self._events = Events()
        while self._waiters:
            wake.clear()
            pending = list(self._waiters)
            found, due_ms, now_ms = await self._aq.call_in_thread(
                functools.partial(self._serve, pending, events))
            for waiter, value, error in found:
                if waiter.future.done():
                    if isinstance(value, Job) or (isinstance(value, list) and value):
                        self.give_back(value, waiter.key)
                elif error is not None:
                    waiter.future.set_exception(error)
                else:
                    waiter.future.set_result(value)
            await asyncio.sleep(0)  # let the served coroutines leave the FIFO
            if not self._waiters:
                break
            wait = pacer.after_look(events, None, due_ms, now_ms)
            wait = MAX_SLEEP if wait is None else min(wait, MAX_SLEEP)
            if self._lost is not None:
                wait = min(wait, self._lost)
                self._events.commit = self._events.owner = True  # anything may have happened
            if polling:
                wait = min(wait, POLL_INTERVAL)
            if wait > 0 and not wake.is_set():
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(wake.wait(), wait)
            events, self._events = self._events, Events()
            if polling:
                events = notifier.drain()  # the polling notifier: always "maybe"

    def _serve(self, pending: list[Waiter], events: Events
               ) -> tuple[list[tuple[Waiter, Any, BaseException | None]], int | None, int]:
        """One pass over the waiters, in this AsyncQueue's thread: each distinct request
        looks once; returns what was found, the earliest due time and the clock."""
        q = self._aq.queue
        self._lost = None
        looked = False
        since = q.engine.clock()  # what comes due after the looks began counts (Engine.due)
        found: list[tuple[Waiter, Any, BaseException | None]] = []
        empty: set[Hashable] = set()
        due_ms: int | None = None
        for waiter in pending:
            if waiter.key in empty or waiter.future.done():
                continue
            try:
                value = waiter.look(events)
            except Disconnected as exc:
                # As the blocking loop does (verbs/waiting.py): an outage is waited through
                # as an empty queue is, each waiter up to its deadline.
                if self._lost is None:
                    self._lost = self._outage.lost(exc)
                empty.add(waiter.key)
                continue
            except Exception as exc:  # noqa: BLE001 - the waiter raises it (JobBuried...)
                found.append((waiter, None, exc))
                continue
            looked = True
            if value is not None:
                found.append((waiter, value, None))
                continue
            empty.add(waiter.key)
            if waiter.due is not None:
                try:
                    due = waiter.due(since)
                except Disconnected as exc:  # a lost connection, as in a look (W4)
                    if self._lost is None:
                        self._lost = self._outage.lost(exc)
                    continue
                except Exception as exc:  # noqa: BLE001 - the waiter raises it
                    found.append((waiter, None, exc))
                    continue
                if due is not None:
                    due_ms = due if due_ms is None else min(due_ms, due)
        if looked and self._lost is None:
            self._outage.looked()
        return found, due_ms, q.engine.clock()
