"""A cap on the memory all connections' put bodies may hold at once.

A put's body is buffered until it has all arrived (the protocol has no streaming),
so without a cap memory grows with connections x max job size: 300 clients each
sending most of a 1 MiB body held 323 MB. Bodies up to one read (``SMALL``) pass
freely, as every connection may hold one read anyway. A larger body gets its
whole announced size from the budget when its command line arrives, or waits for
it in arrival order; meanwhile its connection is read no further than one read,
and the client's sends wait in its socket buffers (TCP's own backpressure). The
grant is held until the put is stored, so puts waiting for another process's
write lock (locks.py) stay within the budget too.

Why whole grants rather than pausing the biggest partial bodies once over the
cap: a body that is read can always be finished, so memory freed by finished
puts goes to the next in line, and the server never stops with every partial
body paused and none able to complete. A body larger than the whole cap is
granted when nothing else holds memory.
"""

from __future__ import annotations

from collections import OrderedDict

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Protocol

    class Conn(Protocol):
        """What the budget asks of a connection waiting for memory (``connection.Conn``)."""

        grant: int  # bytes granted to its body in progress

        def update(self) -> None: ...

DEFAULT_MAX_BUFFERED = 64 << 20
"""The cap's floor; it is at least four bodies of the maximum job size."""


def default_max_buffered(max_job_size: int) -> int:
    """64 MiB, or four maximum-size bodies if that is more."""
    return max(DEFAULT_MAX_BUFFERED, 4 * (max_job_size + 2))


class Budget:
    """Bytes granted to bodies in progress, and the connections waiting for some."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.granted = 0  # bytes held by granted bodies (the buffered-bytes counter)
        self.waiting: OrderedDict[Conn, int] = OrderedDict()

    def ask(self, conn: Conn, need: int) -> None:
        """``conn`` announced a body of ``need`` bytes: grant it now or in turn."""
        self.waiting[conn] = need
        self._grant()

    def give_back(self, conn: Conn) -> None:
        """``conn``'s body arrived, or it closed: its bytes go to the next in line."""
        self.waiting.pop(conn, None)
        if conn.grant:
            self.granted -= conn.grant
            conn.grant = 0
            self._grant()

    def _grant(self) -> None:
        while self.waiting:
            conn, need = next(iter(self.waiting.items()))
            if self.granted and self.granted + need > self.limit:
                return
            del self.waiting[conn]
            self.granted += need
            conn.grant = need
            conn.update()
