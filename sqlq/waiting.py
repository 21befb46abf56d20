"""The one wait loop behind ``reserve`` and ``result``, for every backend.

A waiter looks (one read snapshot), and if it found nothing sleeps on its
backend's notifier until another connection may have committed, something
becomes due (a delayed job, a TTR, the end of a pause), or its deadline. A
commit event that found nothing is looked at again on the notifier's own
re-check schedule: on SQLite the event can come before the commit is visible.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

from .backends import Events, Notifier
from .model import check_seconds

T = TypeVar("T")


def timeout_deadline(timeout: float | None) -> float | None:
    """The monotonic deadline of a ``timeout`` argument in seconds (None: for ever).

    Bounded as every duration is (check_seconds): a float past it would overflow the
    deadline or the poll it becomes; waiting for ever is ``timeout=None``.
    """
    if timeout is None:
        return None
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or timeout != timeout:
        raise TypeError(f"timeout must be a number of seconds or None, not {timeout!r}")
    return time.monotonic() + check_seconds(timeout, "timeout")


def wait_for(notifier: Notifier, look: Callable[[Events], T | None], deadline: float | None,
             clock: Callable[[], int], due: Callable[[], int | None] | None = None) -> T | None:
    """Sleep on ``notifier`` until ``look(events)`` finds something or the deadline passes.

    ``due()`` gives the time (ms, on ``clock``) at which something may change without
    a commit. The notifier must be watching; the caller's last look ran before the
    watch began, so a commit written then may still be unpublished and its event is
    gone: the first pass looks at once and treats that as a commit event.
    """
    first_schedule = notifier.recheck_delays(first=True)
    later_schedule = notifier.recheck_delays(first=False)
    schedule = first_schedule
    step = 0  # > 0: re-checking a commit event that found nothing, 1-based step
    events = Events(commit=True)
    first = True
    while True:
        found = look(events)
        if found is not None:
            return found
        if events.commit:
            # Even when the events drained together include a visible commit, they may
            # also hold the write of a later one not published yet: only the schedule
            # is sure to see it. (The first pass's few quick re-checks cover a commit
            # being published as the wait began.)
            schedule = first_schedule if first else later_schedule
            step = 1 if schedule else 0
        elif step:
            step = step + 1 if step < len(schedule) else 0
        now = time.monotonic()
        if deadline is not None and now >= deadline:
            return None
        wait = None if deadline is None else deadline - now
        due_ms = None if due is None else due()
        if due_ms is not None:
            until_due = max((due_ms - clock()) / 1000, 0.0)
            wait = until_due if wait is None else min(wait, until_due)
        if step:
            wait = schedule[step - 1] if wait is None else min(wait, schedule[step - 1])
        events = notifier.wait(wait) if wait is None or wait > 0 else Events()
        first = False
