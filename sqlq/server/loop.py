"""The event loop: one ``selectors`` selector and a heap of timers, on one thread.

beanstalkd's own shape (one epoll loop). Callbacks get the selector's event
mask; a failing callback is logged and the loop goes on (``guard``). Register
through ``Loop.register``/``modify``/``unregister``: where epoll exists (Linux),
the loop polls it directly and calls ``callbacks[fd]``, sparing the per-round
work of ``selectors`` (its key objects and ready lists) on every command.

A round is one poll, the callbacks of the files it found ready, then the timers
that are due, then the calls put off to it (``again``: a connection that used up
its turn with commands still buffered goes on there, after everyone else had
theirs); ``end_round`` runs after each (the server commits the round's writes
there, batch.py), and ``pending`` says, during a round, how many ready files and
put-off calls are still to be served in it. While calls are put off, the poll
does not wait.
"""

from __future__ import annotations

import heapq
import itertools
import math
import select
import selectors
import socket
import time
from collections.abc import Callable

from sqlq.core.logger import logger

# No typing or logging at import time: sqlq-beanstalkd imports this before it listens.
TYPE_CHECKING = False
if TYPE_CHECKING:
    import logging


def log() -> logging.Logger:
    """The server's logger, imported on first use (logging costs milliseconds to import)."""
    return logger("sqlq.server")


def now_ms() -> int:
    """Wall-clock milliseconds, the Queue's time base (``durations.now_ms``, which this
    copies: importing sqlq.core.durations, and ``re`` with it, costs sqlq-beanstalkd about 3 ms
    before it listens; test_server_module_does_not_import_the_queue_before_it_listens)."""
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


_EPOLL = getattr(select, "epoll", None)
_EPOLLIN = getattr(select, "EPOLLIN", 0)
_EPOLLOUT = getattr(select, "EPOLLOUT", 0)


def _epoll_mask(events: int) -> int:
    """The epoll bits for a ``selectors`` event mask."""
    return ((_EPOLLIN if events & selectors.EVENT_READ else 0)
            | (_EPOLLOUT if events & selectors.EVENT_WRITE else 0))


# The selectors mask for the bits epoll reports, as EpollSelector maps them: an error
# or hang-up reads as both, so the callback finds out by trying (Loop._poll).
_READ, _WRITE = selectors.EVENT_READ, selectors.EVENT_WRITE
_NOT_IN, _NOT_OUT = ~_EPOLLIN, ~_EPOLLOUT


class Loop:
    """A selector and a heap of timers: all the event loop beanstalkd needs."""

    def __init__(self) -> None:
        # fd -> (callback, selectors mask) of every registered file
        self.callbacks: dict[int, tuple[Callable[[int], None], int]] = {}
        self._epoll = _EPOLL() if _EPOLL is not None else None
        self.selector = selectors.DefaultSelector() if self._epoll is None else None
        self._timers: list[tuple[float, int, Timer]] = []
        self._seq = itertools.count()
        self.stopping = False
        self._calls: list[Callable[[], None]] = []  # from other threads, run on the loop
        self._again: list[Callable[[], None]] = []  # put off to the next round (again())
        self.pending = 0  # ready files and put-off calls of this round still to run
        self.end_round: Callable[[], None] | None = None
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_r.setblocking(False)
        self._wake_w.setblocking(False)
        self.register(self._wake_r, selectors.EVENT_READ, self._drain_wakeups)

    def register(self, file: socket.socket | int, events: int,
                 fn: Callable[[int], None]) -> None:
        """Call ``fn(mask)`` when ``file`` is ready for ``events`` (selectors' EVENT_* bits)."""
        self._set(file, events, fn, new=True)

    def modify(self, file: socket.socket | int, events: int,
               fn: Callable[[int], None]) -> None:
        self._set(file, events, fn, new=False)

    def _set(self, file: socket.socket | int, events: int, fn: Callable[[int], None],
             new: bool) -> None:
        fd = file if isinstance(file, int) else file.fileno()
        if (fd in self.callbacks) == new:
            raise KeyError(f"fd {fd} is {'already' if new else 'not'} registered")
        if self._epoll is not None:
            (self._epoll.register if new else self._epoll.modify)(fd, _epoll_mask(events))
        else:
            assert self.selector is not None
            (self.selector.register if new else self.selector.modify)(fd, events, fn)
        self.callbacks[fd] = (fn, events)

    def unregister(self, file: socket.socket | int) -> None:
        fd = file if isinstance(file, int) else file.fileno()
        del self.callbacks[fd]
        if self._epoll is not None:
            try:
                self._epoll.unregister(fd)
            except OSError:
                pass  # closed meanwhile: epoll dropped it already
        else:
            assert self.selector is not None
            self.selector.unregister(fd)

    def call_later(self, delay: float, fn: Callable[[], None]) -> Timer:
        timer = Timer(time.monotonic() + max(delay, 0.0), fn)
        heapq.heappush(self._timers, (timer.when, next(self._seq), timer))
        return timer

    def again(self, fn: Callable[[], None]) -> None:
        """Call ``fn`` in the next round, after that round's ready files and timers:
        a connection that used up its turn goes on once the others had theirs."""
        self._again.append(fn)

    def others_waiting(self, fd: int) -> bool:
        """Whether anything but ``fd`` waits to be served: files left in this round,
        calls put off, or another file ready now (a poll that does not wait). A
        connection yields its turn only then: alone, it keeps its pipeline in one
        round, and so in one commit (batch.py)."""
        if self.pending or self._again:
            return True
        if self._epoll is None:
            return True  # no cheap look: yield, as fairness asks
        return any(ready != fd for ready, _ in self._epoll.poll(0))

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
            again, self._again = self._again, []
            if again:
                timeout = 0.0
            self._poll(timeout, len(again))
            if self._timers:  # (the usual round has none: no clock to read)
                now = time.monotonic()
                while self._timers and self._timers[0][0] <= now and not self.stopping:
                    _, _, timer = heapq.heappop(self._timers)
                    if not timer.cancelled:
                        timer.cancelled = True
                        guard(timer.fn)
            for i, fn in enumerate(again):
                self.pending = len(again) - 1 - i
                guard(fn)
            self.pending = 0
            if self.end_round is not None:
                guard(self.end_round)

    def _poll(self, timeout: float | None, later: int = 0) -> None:
        """Wait for the registered files, up to ``timeout`` seconds; run their callbacks.

        A callback is looked up when its turn comes: a file that an earlier callback
        of the same round unregistered is skipped. ``later``: put-off calls that run
        after these callbacks in this round (counted in ``pending``).
        """
        callbacks = self.callbacks
        if self._epoll is None:
            assert self.selector is not None
            ready = [(key.fd, mask) for key, mask in self.selector.select(timeout)]
        else:
            # epoll takes milliseconds, rounded up, as selectors does: never spin early
            ms = -1 if timeout is None else math.ceil(timeout * 1e3) * 1e-3
            try:
                polled = self._epoll.poll(ms, max(len(callbacks), 1))
            except InterruptedError:
                return
            # (the mask computed inline: a call per ready file is a call per command)
            ready = [(fd, (_WRITE if e & _NOT_IN else 0) | (_READ if e & _NOT_OUT else 0))
                     for fd, e in polled]
        left = self.pending = len(ready) + later
        for fd, mask in ready:
            left -= 1
            self.pending = left
            entry = callbacks.get(fd)
            if entry is None:
                continue
            fn, events = entry
            mask &= events
            if mask:
                try:
                    fn(mask)
                except Exception:
                    log().exception("internal error")

    def close(self) -> None:
        if self._epoll is not None:
            self._epoll.close()
        if self.selector is not None:
            self.selector.close()
        self._wake_r.close()
        self._wake_w.close()
