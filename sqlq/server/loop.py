"""The event loop: one ``selectors`` selector and a heap of timers, on one thread.

beanstalkd's own shape (one epoll loop). Callbacks get the selector's event
mask; a failing callback is logged and the loop goes on (``guard``).
"""

from __future__ import annotations

import heapq
import itertools
import selectors
import socket
import time
from collections.abc import Callable

# No typing or logging at import time: sqlq-beanstalkd imports this before it listens.
TYPE_CHECKING = False
if TYPE_CHECKING:
    import logging


def log() -> logging.Logger:
    """The server's logger, imported on first use (logging costs milliseconds to import)."""
    import logging

    return logging.getLogger("sqlq.server")


def now_ms() -> int:
    """Wall-clock milliseconds, the Queue's time base (reserved_until is in it)."""
    return time.time_ns() // 1_000_000


def guard(fn: Callable[..., None], *args: int) -> None:
    """A bug or an I/O error in one callback is logged; the server goes on serving."""
    try:
        fn(*args)
    except Exception:
        log().exception("internal error")


class Timer:
    """A pending call; cancelled timers stay in the heap and are skipped."""

    __slots__ = ("when", "fn", "cancelled")

    def __init__(self, when: float, fn: Callable[[], None]) -> None:
        self.when, self.fn, self.cancelled = when, fn, False

    def cancel(self) -> None:
        self.cancelled = True


class Loop:
    """A selector and a heap of timers: all the event loop beanstalkd needs."""

    def __init__(self) -> None:
        self.selector = selectors.DefaultSelector()
        self._timers: list[tuple[float, int, Timer]] = []
        self._seq = itertools.count()
        self.stopping = False
        self._calls: list[Callable[[], None]] = []  # from other threads, run on the loop
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_r.setblocking(False)
        self._wake_w.setblocking(False)
        self.selector.register(self._wake_r, selectors.EVENT_READ, self._drain_wakeups)

    def call_later(self, delay: float, fn: Callable[[], None]) -> Timer:
        timer = Timer(time.monotonic() + max(delay, 0.0), fn)
        heapq.heappush(self._timers, (timer.when, next(self._seq), timer))
        return timer

    def call_soon_threadsafe(self, fn: Callable[[], None]) -> None:
        self._calls.append(fn)
        self._wake()

    def stop(self) -> None:
        """Stop the loop; safe from a signal handler or another thread."""
        self.stopping = True
        self._wake()

    def _wake(self) -> None:
        try:
            self._wake_w.send(b"\0")
        except OSError:
            pass

    def wakeup_fd(self) -> int:
        """The fd for ``signal.set_wakeup_fd``: a signal wakes the select at once."""
        return self._wake_w.fileno()

    def _drain_wakeups(self, mask: int) -> None:
        try:
            while self._wake_r.recv(4096):
                pass
        except OSError:
            pass
        while self._calls:
            self._calls.pop(0)()

    def run(self) -> None:
        while not self.stopping:
            timeout = None
            while self._timers and self._timers[0][2].cancelled:
                heapq.heappop(self._timers)
            if self._timers:
                timeout = max(self._timers[0][0] - time.monotonic(), 0.0)
            for key, mask in self.selector.select(timeout):
                guard(key.data, mask)
            now = time.monotonic()
            while self._timers and self._timers[0][0] <= now and not self.stopping:
                _, _, timer = heapq.heappop(self._timers)
                if not timer.cancelled:
                    timer.cancelled = True
                    guard(timer.fn)

    def close(self) -> None:
        self.selector.close()
        self._wake_r.close()
        self._wake_w.close()
