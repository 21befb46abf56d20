"""A synchronous face on an AsyncQueue, so that the Queue's semantic tests run through it.

Every call is the AsyncQueue's coroutine, run on an event loop in another thread;
reserved jobs come back as handles whose verbs are the AsyncJob's coroutines. A test
marked ``both_apis`` gets its ``q``/``fq`` once as a Queue and once as this bridge:
the same test body, not a copy. A verb AsyncQueue lacks is an AttributeError, so a
gap shows up as a failing test; plain attributes (``path``, ``backend``) come from
the Queue underneath.
"""

from __future__ import annotations

import asyncio
import inspect
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

import sqlq

T = TypeVar("T")
_JOB_VERBS = frozenset({"delete", "release", "bury", "touch", "complete", "progress", "step",
                        "cursor", "save_cursor", "snooze"})


class Loop:
    """An event loop running in a daemon thread."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result()

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(5)
        self.loop.close()


def _unwrap(value: Any) -> Any:
    if isinstance(value, list):
        return [_unwrap(v) for v in value]
    return value.ajob if isinstance(value, BridgedJob) else value


class BridgedJob:
    """An AsyncJob with its verbs run to completion."""

    def __init__(self, loop: Loop, ajob: sqlq.AsyncJob) -> None:
        self.loop = loop
        self.ajob = ajob

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self.ajob, name)
        if name not in _JOB_VERBS:
            return attr
        return lambda *args, **kwargs: self.loop.run(attr(*args, **kwargs))


def _bridged(loop: Loop, attr: Any) -> Any:
    """A coroutine method run to completion (its AsyncJobs as BridgedJobs); anything
    else as it is."""
    if not inspect.iscoroutinefunction(attr):
        return attr

    def call(*args: Any, **kwargs: Any) -> Any:
        args = tuple(_unwrap(a) for a in args)
        kwargs = {k: _unwrap(v) for k, v in kwargs.items()}
        value = loop.run(attr(*args, **kwargs))
        if isinstance(value, list) and value and isinstance(value[0], sqlq.AsyncJob):
            return [BridgedJob(loop, v) for v in value]
        return BridgedJob(loop, value) if isinstance(value, sqlq.AsyncJob) else value

    return call


class BridgedViews:
    """``aq.views`` (an AsyncViews) driven synchronously."""

    def __init__(self, loop: Loop, views: Any) -> None:
        self.loop = loop
        self.views = views

    def __getattr__(self, name: str) -> Any:
        return _bridged(self.loop, getattr(self.views, name))


class BridgedQueue:
    """An AsyncQueue driven synchronously (see the module docstring)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.loop = Loop()
        self.aq = sqlq.AsyncQueue(*args, **kwargs)
        self.loop.run(self.aq.open())

    def __getattr__(self, name: str) -> Any:
        if not hasattr(self.aq, name):
            value = getattr(self.aq.queue, name)
            if callable(value):
                raise AttributeError(f"AsyncQueue has no {name}")
            return value
        attr = getattr(self.aq, name)
        if name == "views":
            return BridgedViews(self.loop, attr)
        return _bridged(self.loop, attr)

    def close(self) -> None:
        self.loop.run(self.aq.close())
        self.loop.close()

    def __enter__(self) -> BridgedQueue:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
