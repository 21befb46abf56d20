"""The one wait policy behind ``reserve`` and ``result``, for every backend.

A waiter looks (one read snapshot), and if it found nothing sleeps on its
backend's notifier until another connection may have committed, something
becomes due (a delayed job, a TTR, the end of a pause), or its deadline. A
commit event that found nothing is looked at again on the notifier's own
re-check schedule: on SQLite the event can come before the commit is visible.

The decisions (when to look again) are :class:`Pacer`'s; :func:`wait_for` is
the blocking loop around it (``Queue``), and ``sqlq.asyncq`` drives the same
Pacer from an event loop, for all of an AsyncQueue's waiters at once.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

from ..backends import Events, Notifier
from ..core.durations import MAX_SECONDS, check_seconds
from ..core.logger import logger
from ..errors import Disconnected

T = TypeVar("T")

#: How long a waiter whose database server went away waits before looking again, at
#: first and at most (each look also retries the connection for a while: db.py).
RETRY_FIRST_S = 0.1
RETRY_MAX_S = 2.0


def timeout_deadline(timeout: float | None) -> float | None:
    """The monotonic deadline of a ``timeout`` argument in seconds (None: for ever).

    Bounded as every duration is (check_seconds): a float past it would overflow the
    deadline or the poll it becomes; waiting for ever is ``timeout=None``.
    """
    if timeout is None:
        return None
    if timeout.__class__ is int and 0 <= timeout <= MAX_SECONDS:  # the hot path: timeout=0
        return time.monotonic() + timeout
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or timeout != timeout:
        raise TypeError(f"timeout must be a number of seconds or None, not {timeout!r}")
    return time.monotonic() + check_seconds(timeout, "timeout")


class Pacer:
    """When to look again, after a look that found nothing.

    Begin a wait with a look that counts as a commit and an owner event
    (``Events(commit=True, owner=True)``): the caller's last look ran before the watch
    began, so a commit written then may still be unpublished, and a holder that died
    then has closed its owner file unheard: both events are gone.
    """

    def __init__(self, notifier: Notifier) -> None:
        self._first_schedule = notifier.recheck_delays(first=True)
        self._later_schedule = notifier.recheck_delays(first=False)
        self._schedule = self._first_schedule
        self._step = 0  # > 0: re-checking a commit event that found nothing, 1-based step
        self._first = True

    def after_look(self, events: Events, deadline: float | None = None,
                   due_ms: int | None = None, now_ms: int = 0) -> float | None:
        """Seconds to sleep before the next look (None: until an event), given the events
        the empty look went by, the monotonic ``deadline`` and the time ``due_ms`` (on
        the clock that read ``now_ms``) at which something may change without a commit.
        Negative: the deadline has passed, stop waiting.
        """
        if events.commit:
            # Even when the events drained together include a visible commit, they may
            # also hold the write of a later one not published yet: only the schedule
            # is sure to see it. (The first pass's few quick re-checks cover a commit
            # being published as the wait began.)
            self._schedule = self._first_schedule if self._first else self._later_schedule
            self._step = 1 if self._schedule else 0
        elif self._step:
            self._step = self._step + 1 if self._step < len(self._schedule) else 0
        self._first = False
        wait: float | None = None
        if deadline is not None:
            wait = deadline - time.monotonic()
            if wait <= 0:
                return -1.0
        if due_ms is not None:
            until_due = max((due_ms - now_ms) / 1000, 0.0)
            wait = until_due if wait is None else min(wait, until_due)
        if self._step:
            recheck = self._schedule[self._step - 1]
            wait = recheck if wait is None else min(wait, recheck)
        return wait


class Outage:
    """A database server gone away, waited through as an empty queue is: when to look
    again (RETRY_FIRST_S, doubling to RETRY_MAX_S), said once in the log each way."""

    def __init__(self) -> None:
        self.retry = RETRY_FIRST_S

    @property
    def ongoing(self) -> bool:
        return self.retry != RETRY_FIRST_S

    def lost(self, error: Exception) -> float:
        """A look met a lost connection: the seconds to wait before the next one."""
        if not self.ongoing:
            logger().warning("%s; waiting for the database to come back", error)
        wait, self.retry = self.retry, min(self.retry * 2, RETRY_MAX_S)
        return wait

    def looked(self) -> None:
        """A look went through: the outage, if there was one, is over."""
        if self.ongoing:
            logger().warning("the database is back; waiting goes on")
            self.retry = RETRY_FIRST_S


def wait_for(notifier: Notifier, look: Callable[[Events], T | None], deadline: float | None,
             clock: Callable[[], int], due: Callable[[int], int | None] | None = None
             ) -> T | None:
    """Sleep on ``notifier`` until ``look(events)`` finds something or the deadline passes.

    ``due(since)`` gives the time (ms, on ``clock``) after ``since`` (when the look
    began) at which something may change without a commit. The notifier must be
    watching (see :class:`Pacer` for the first look).
    """
    pacer = Pacer(notifier)
    # What the watch heard before this wait (a watch left up by the last one: our own
    # commits since, or a holder's exit) counts with the first look, which covers it.
    events = notifier.drain()
    events.commit = events.owner = True  # the first look's (Pacer)
    outage = Outage()
    while True:
        try:
            looked = clock()
            found = look(events)
            due_ms = None if due is None or found is not None else due(looked)
        except Disconnected as e:
            # The server restarted or dropped us: a look is safe to make again (a claim
            # cut off may have committed; its job comes back: db.ClaimLedger). An
            # outage is waited through as an empty queue is, up to the deadline (then
            # None, as for a timeout).
            retry = outage.lost(e)
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                return None
            time.sleep(retry if left is None else min(retry, left))
            events = Events(commit=True, owner=True)  # anything may have happened meanwhile
            continue
        outage.looked()
        if found is not None:
            return found
        if deadline is not None and time.monotonic() >= deadline:
            return None
        wait = pacer.after_look(events, deadline, due_ms, clock())
        if wait is not None and wait < 0:
            return None
        events = notifier.wait(wait) if wait is None or wait > 0 else Events()
