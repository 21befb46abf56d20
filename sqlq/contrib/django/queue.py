"""The queue ``settings.SQLQ`` configures, opened on first use, never at import.

Task modules are imported while Django starts (autodiscovery), before settings may
be read and long before a database may be opened, so ``@task`` cannot take a
Queue. It takes :data:`queue`, a :class:`DjangoQueue`: the configured Queue's
stand-in, which opens it when first asked for something and answers every Queue
method through it, except ``put``, which follows Django's transaction:

* the queue shares Django's database: the job is written through Django's own
  connection (``sqlq.put(conn)``), inside the request's ``atomic()`` block if there
  is one, so it commits or rolls back with the rows;
* the queue is a database of its own: inside ``atomic()`` the put waits for
  ``transaction.on_commit`` (and returns None: there is no job yet); outside, it
  is made at once.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, ParamSpec, TypeVar, overload

from ...errors import SchemaError
from ...model import DEFAULT_PRIORITY, DEFAULT_TTR, DEFAULT_TUBE
from ...queue import Queue
from .. import _shared
from . import conf

if TYPE_CHECKING:
    from ...tasks.task import Task

P = ParamSpec("P")
R = TypeVar("R")


class DjangoQueue:
    """The Queue of ``settings.SQLQ``, opened lazily (once per process) and closed
    with :meth:`close`; every Queue attribute is the opened Queue's."""

    def __init__(self) -> None:
        self._config: conf.Config | None = None
        self._queue: Queue | None = None
        self._pid = 0
        self._lock = threading.Lock()

    @property
    def config(self) -> conf.Config:
        """``settings.SQLQ``, read and checked on first use."""
        if self._config is None:
            self._config = conf.read()
        return self._config

    @property
    def path(self) -> str:
        """The database (without opening it): what ``sqlq work`` compares."""
        return self.config.location

    def get(self) -> Queue:
        """The opened Queue (opened now if need be; again in a forked child)."""
        queue = self._queue
        if queue is None or self._pid != os.getpid():
            with self._lock:
                if self._queue is None or self._pid != os.getpid():
                    config = self.config
                    self._queue = Queue(config.location, **config.queue_kwargs)
                    self._pid = os.getpid()
                queue = self._queue
        return queue

    def close(self) -> None:
        """Close the Queue if it was opened (the next use opens it again)."""
        with self._lock:
            queue, self._queue = self._queue, None
        if queue is not None and self._pid == os.getpid():
            queue.close()

    def reset(self) -> None:
        """Close, and read ``settings.SQLQ`` again on next use (settings changed)."""
        self.close()
        self._config = None

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return getattr(self.get(), name)

    def __repr__(self) -> str:
        where = self._config.child_location() if self._config else "(settings not read yet)"
        return f"<sqlq.contrib.django.DjangoQueue {where}>"

    def put(self, body: bytes | str, *, tube: str = DEFAULT_TUBE,
            priority: int = DEFAULT_PRIORITY, delay: float = 0, ttr: float = DEFAULT_TTR,
            unique_key: str | None = None, after: int | Iterable[int] | None = None,
            on_conflict: str = "keep") -> int | None:
        """Put a job, following Django's transaction (see the module doc); ``after``
        as in :meth:`sqlq.Queue.put` (parents to wait for).

        Returns:
            The job's id; None when a queue of its own waits for Django's commit.
        """
        from django.db import DEFAULT_DB_ALIAS, connections, transaction

        config = self.config
        django = connections[config.alias if config.alias is not None else DEFAULT_DB_ALIAS]
        raw = None
        if config.alias is not None:
            django.ensure_connection()
            raw = django.connection
        using = django.alias
        try:
            return _shared.put(
                self.get, body, max_job_size=config.max_job_size, conn=raw,
                in_transaction=django.in_atomic_block,
                on_commit=lambda fn: transaction.on_commit(fn, using=using),
                tube=tube, priority=priority, delay=delay, ttr=ttr, unique_key=unique_key,
                after=after, on_conflict=on_conflict)
        except SchemaError as exc:
            if config.alias is None:
                raise
            raise SchemaError(f"{exc} (for Django's database {config.alias!r}: "
                              "python manage.py migrate sqlq)") from None

    @overload
    def task(self, fn: Callable[P, R], /) -> Task[P, R, int | None]: ...

    @overload
    def task(self, fn: None = None, /, **options: Any
             ) -> Callable[[Callable[P, R]], Task[P, R, int | None]]: ...

    def task(self, fn: Callable[P, R] | None = None, /, **options: Any) -> Any:
        """``@task``: :meth:`sqlq.Queue.task` on this queue, usable at import time. The
        task's ``put`` is :meth:`put`: the job's id, or None while it waits for the commit."""
        from ...tasks.task import decorator

        return decorator(self, fn, **options)

    @overload
    def periodic(self, fn: Callable[[], R], /) -> Task[[], R, int | None]: ...

    @overload
    def periodic(self, fn: None = None, /, **options: Any
                 ) -> Callable[[Callable[[], R]], Task[[], R, int | None]]: ...

    def periodic(self, fn: Callable[[], R] | None = None, /, *, every: float | None = None,
                 cron: str | None = None, **options: Any) -> Any:
        """``@periodic``: :meth:`sqlq.Queue.periodic` on this queue, at import time."""
        from ...tasks.periodic import Schedule
        from ...tasks.task import decorator

        return decorator(self, fn, periodic=Schedule(every, cron), **options)


#: The queue of ``settings.SQLQ``: ``queue.result(job_id)``, ``queue.stats()``, ...
queue = DjangoQueue()


@overload
def task(fn: Callable[P, R], /) -> Task[P, R, int | None]: ...


@overload
def task(fn: None = None, /, **options: Any
         ) -> Callable[[Callable[P, R]], Task[P, R, int | None]]: ...


def task(fn: Callable[P, R] | None = None, /, **options: Any) -> Any:
    """Declare a task in an app's ``tasks.py``: ``@task`` or ``@task(tube=..., retries=...)``.

    The options are :meth:`sqlq.Queue.task`'s. ``f.put(...)`` follows Django's
    transaction (see :class:`DjangoQueue`) and returns the job's id, or None when it
    waits for the commit.
    """
    return queue.task(fn, **options)


@overload
def periodic(fn: Callable[[], R], /) -> Task[[], R, int | None]: ...


@overload
def periodic(fn: None = None, /, **options: Any
             ) -> Callable[[Callable[[], R]], Task[[], R, int | None]]: ...


def periodic(fn: Callable[[], R] | None = None, /, **options: Any) -> Any:
    """Declare a periodic task (``every=`` seconds or ``cron=``), as :meth:`sqlq.Queue.periodic`."""
    return queue.periodic(fn, **options)


__all__ = ["DjangoQueue", "periodic", "queue", "task"]
