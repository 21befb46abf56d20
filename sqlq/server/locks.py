"""Commands that wait for another process's write lock, without stalling the loop.

The server's Queue waits at most ``LOCK_WAIT`` for SQLite's write lock; a write
that could not have it raises ``sqlq.Locked`` having changed nothing. Its
command is parked here, and its connection reads no further command until
it is answered, so each client's replies keep their order and its reads see
its own writes. Meanwhile every other command runs: reads (WAL readers never
wait for a writer), the in-memory ones (``use``, ``watch``, ``list-tube-used``,
counters) and other connections' commands. Writes arriving while commands are
parked queue behind them without trying: first come, first served, and the
loop does not spend ``LOCK_WAIT`` on each.

One timer retries the oldest parked command, backing off from ``FIRST_RETRY``
to ``MAX_RETRY`` while the lock stays taken; once it succeeds, the others
follow in order in the same turn. beanstalkd never meets this (its jobs are in
its own memory); a sqlq file is shared with library users and their
transactions (``q.transaction()``), which may hold the lock for seconds.
"""

from __future__ import annotations

import time
from collections import OrderedDict

from sqlq.errors import Locked
from sqlq.server.loop import log
from sqlq.server.protocol import Reply

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Protocol

    from sqlq.server.connection import Conn
    from sqlq.server.loop import Loop, Timer

    class Server(Protocol):
        """What the parked commands ask of their server (``core.Server``): its loop's
        timer, and a poke for the waiting reserves once the lock is free."""

        @property
        def loop(self) -> Loop: ...

        @property
        def waiters(self) -> _Waiters: ...

    class _Waiters(Protocol):  # waiters.Waiters
        def poke(self) -> None: ...

LOCK_WAIT = 0.02
"""Seconds a write on the loop waits for the lock: longer than most commits of other
processes (an fsync included), short enough that every other client is still served."""
FIRST_RETRY = 0.005
MAX_RETRY = 0.1
"""Retries of parked commands back off between these (seconds)."""


class LockWaits:
    """The parked commands, oldest first, and the one timer that retries them."""

    def __init__(self, server: Server) -> None:
        self.server = server
        # key (the connection, or a bare object for the server's own work, such as
        # giving back a closed connection's jobs) -> (whom to answer, the command)
        self.parked: OrderedDict[object, tuple[Conn | None, Callable[[], bytes]]] = (
            OrderedDict())
        self._timer: Timer | None = None
        self._backoff = FIRST_RETRY / 2
        self.retry_at = 0.0  # time.monotonic() before which a write would surely be refused

    def locked(self) -> bool:
        """True while commands wait for the lock, or a write was refused in the back-off.
        (The clock is read only within a back-off: this runs for every write.)"""
        if self.parked:
            return True
        if self.retry_at:
            if time.monotonic() < self.retry_at:
                return True
            self.retry_at = 0.0  # the back-off is over
        return False

    def run(self, conn: Conn | None, attempt: Callable[[], bytes], write: bool = True
            ) -> bytes | None:
        """``attempt()``'s reply, or None: it waits for the lock, and ``conn`` (None:
        nobody) gets the reply later. A write is not even tried while others wait."""
        if not (write and self.locked()):
            try:
                return attempt()
            except Locked:
                self.refused()
        self.park(conn, attempt)
        return None

    def park(self, conn: Conn | None, attempt: Callable[[], bytes]) -> None:
        """Run ``attempt`` once the lock may be free; ``conn`` reads nothing meanwhile."""
        if conn is not None:
            conn.blocked = True
        self.parked[conn if conn is not None else object()] = (conn, attempt)
        self._arm()

    def refused(self) -> None:
        """A write found the lock taken: back off before the next try."""
        self._backoff = min(self._backoff * 2, MAX_RETRY)
        self.retry_at = time.monotonic() + self._backoff
        self._arm()

    def forget(self, conn: Conn) -> None:
        """A closed connection's parked command is dropped (it changed nothing)."""
        self.parked.pop(conn, None)

    def _arm(self) -> None:
        if self.parked and (self._timer is None or self._timer.cancelled):
            delay = max(self.retry_at - time.monotonic(), 0.0)
            self._timer = self.server.loop.call_later(delay, self._retry)

    def _retry(self) -> None:
        """Run the parked commands in order until one is refused again."""
        self._timer = None
        while self.parked:
            key, (conn, attempt) = next(iter(self.parked.items()))
            try:
                reply = attempt()
            except Locked:
                self.refused()
                return
            except Exception:
                log().exception("a command waiting for the lock failed")
                reply = Reply.INTERNAL_ERROR
            del self.parked[key]
            self._backoff, self.retry_at = FIRST_RETRY / 2, 0.0
            if conn is not None and not conn.closed:
                conn.answered(reply)
        self.server.waiters.poke()  # reserves did not look while the lock was taken
