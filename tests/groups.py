"""Forming a group commit on purpose, for the tests of backends/group.py (unit) and of
a full disk under a group of writers (bad input): a clock that holds the first put
inside its write until the others are queued behind it."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import sqlq
from sqlq.core.durations import now_ms
from tests.timing import PATIENCE

#: How long a test waits for threads to line up (tests/timing.py).
WAIT_S = PATIENCE


class GateClock:
    """The real clock, except that a call from ``holder`` blocks until ``gate`` opens;
    notes which thread made each call (the thread that ran the write)."""

    def __init__(self) -> None:
        self.gate = threading.Event()
        self.held = threading.Event()
        self.holder: threading.Thread | None = None
        self.callers: list[str] = []

    def reset(self) -> GateClock:
        """Ready to hold the next group."""
        self.gate.clear()
        self.held.clear()
        return self

    def __call__(self) -> int:
        me = threading.current_thread()
        if me is self.holder and not self.gate.is_set():
            self.held.set()
            assert self.gate.wait(WAIT_S)
        self.callers.append(me.name)
        return now_ms()


def wait_until(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + WAIT_S
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.002)


def queued(q: sqlq.Queue) -> int:
    return len(q.backend._group._queue)  # type: ignore[attr-defined]


def run_as_group(q: sqlq.Queue, clock: GateClock, ops: list[Callable[[], Any]]
                 ) -> tuple[Any, list[tuple[str, Any]]]:
    """Hold the connection with one put, queue ``ops`` behind it (a thread each, in
    order), let go: (the holder's id or error, each op's ("ok", value) or ("error",
    exception) in op order)."""
    outcomes: list[tuple[str, Any]] = [("none", None)] * len(ops)
    held: list[Any] = []

    def hold() -> None:
        try:
            held.append(q.put(b"holder"))
        except sqlq.Error as e:  # the tests that fail every write look at the others
            held.append(e)

    def run(i: int) -> None:
        try:
            outcomes[i] = ("ok", ops[i]())
        except Exception as e:  # noqa: BLE001 - the test looks at it
            outcomes[i] = ("error", e)

    holder = threading.Thread(target=hold, name="holder")
    clock.holder = holder
    holder.start()
    assert clock.held.wait(WAIT_S)
    threads = [threading.Thread(target=run, args=(i,), name=f"op{i}") for i in range(len(ops))]
    for i, t in enumerate(threads, 1):  # one after another: queued in op order (started at
        t.start()                       # once, a thread the OS put off came in later)
        wait_until(lambda i=i: queued(q) == i, f"{i} queued writes")
    clock.gate.set()
    for t in [holder, *threads]:
        t.join(WAIT_S)
        assert not t.is_alive()
    return held[0], outcomes
