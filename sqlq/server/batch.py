"""Group commit: the writes of one loop round share one transaction and one fsync.

Commands that arrive together, from many connections or pipelined on one, are
run in one write transaction, each in its own savepoint, and committed once at
the end of the loop round (``Loop.end_round``). Their replies, and every reply
made while the transaction is open (a read in it sees the round's writes), are
held in their connection (``Conn.held``) and sent only once the commit is
durable: no client hears of a write a power cut could still take back. Per
connection, replies keep their order; a connection whose held replies reach
``HIGH_WATER`` reads no further command until they are sent.

Why a savepoint per command: a command that fails answers that command only,
as it would alone (a claim or a multi-statement verb is rolled back whole, and
on PostgreSQL a failed statement would otherwise void the transaction). It costs
two statements, a few microseconds, against an fsync saved per command. A
command that writes with one statement (a put, a delete: ``single``) needs none
where a failed statement undoes only itself (SQLite: ``Backend.statement_atomic``):
the round's hottest commands skip that fifth of their cost.

A write with nothing else to do in its round (``alone``: no other ready file, no
more input on its connection) runs as it always did, in its own commit: a lone
client pays nothing for the batching. So do the claims handed to blocked
reserves on a timer: they need no fsync, and a claim held open until the end of
the round would hold its row lock longer against other processes' workers.

Claims, releases and touches may be lost on power loss (the job comes back), so a
round that has only those commits without an fsync. The first write that must
be durable (a put, a delete, a bury...) commits what came before it and opens a
durable transaction, which every later write of the round joins.

A commit that fails (an I/O error, a full disk) has lost every write of the
round: the connections whose replies were held are closed, as if the server had
restarted (their reservations go back, as any closed connection's). Their
replies cannot be taken back one by one: a ``use`` or a ``watch`` answered in
the round has already changed the connection's state.
"""

from __future__ import annotations

from sqlq.errors import JobLost, JobNotFound, JobTooBig, Locked
from sqlq.server.loop import log

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from contextlib import AbstractContextManager
    from typing import Any, Protocol, TypeVar

    from sqlq.backends import Backend
    from sqlq.queue import Queue
    from sqlq.server.connection import Conn
    from sqlq.server.locks import LockWaits
    from sqlq.server.loop import Loop

    class Server(Protocol):
        """What the round's transaction asks of its server (``core.Server``)."""

        @property
        def q(self) -> Queue: ...

        @property
        def loop(self) -> Loop: ...

        @property
        def locks(self) -> LockWaits: ...

    T = TypeVar("T")

# What a handler expects and answers itself: nothing about the transaction is wrong.
_EXPECTED = (Locked, JobLost, JobNotFound, JobTooBig)


class Batch:
    """The round's open write transaction, if any, and the connections it holds replies for."""

    def __init__(self, server: Server) -> None:
        self.server = server
        self.open = False  # a transaction is open: replies are held (Conn.send)
        self.durable = False  # ... and its commit is durable (fsync'd in full mode)
        self.held: list[Conn] = []  # connections with replies held, in the order they came
        self._tx: AbstractContextManager[Any] | None = None
        self._backend: Backend  # the open transaction's, set by _begin
        self._atomic = False  # ... and its statement_atomic
        self.commits = 0  # transactions committed (the sqlq-batches stat)
        self.writes = 0   # writes they held (the sqlq-batched-writes stat)

    def alone(self, conn: Conn | None) -> bool:
        """True if nothing else is to be done in this round: a write runs on its own."""
        server = self.server
        return not (server.loop.pending or (conn is not None and conn.inbuf)
                    or len(server.locks.parked) > 1)

    def run(self, attempt: Callable[[], T], durable: bool, conn: Conn | None,
            single: bool = False) -> T:
        """``attempt()``, a write, in the round's transaction (opened now if need be).
        ``single``: it writes with one statement, or fails having written nothing.

        Raises whatever ``attempt`` raises, its writes rolled back; ``Locked`` when
        another process holds the write lock (nothing written, nothing held).
        """
        if not self.open:
            if self.alone(conn):
                return attempt()
            self._begin(durable)
        elif durable and not self.durable:
            self.commit()  # what came before needs no fsync; what comes next does
            self._begin(True)
        self.writes += 1
        try:
            if single and self._atomic:
                return attempt()
            with self._backend.transaction():  # a savepoint
                return attempt()
        except _EXPECTED:
            raise
        except Exception:
            # An I/O error or a full disk may have ended the transaction already:
            # settle the round's writes now, before anything else joins.
            self.commit()
            raise

    def _begin(self, durable: bool) -> None:
        backend = self._backend = self.server.q.backend
        self._atomic = backend.statement_atomic
        tx = backend.transaction(durable=durable)
        tx.__enter__()  # Locked: the lock is another process's; nothing is open
        self._tx, self.open, self.durable = tx, True, durable

    def commit(self) -> None:
        """Commit the open transaction, then send the replies it held."""
        tx, self._tx = self._tx, None
        if tx is None:
            return
        self.open = False
        held, self.held = self.held, []
        try:
            tx.__exit__(None, None, None)
        except Exception:
            log().exception("a group commit failed: closing the %d connections it answers",
                            len(held))
            for conn in held:
                conn.held.clear()
                conn.close()
            return
        self.commits += 1
        for conn in held:
            conn.release_held()

    def end_round(self) -> None:
        """Commit the round's writes; connections with more input go on (a new round's
        worth of it, committed here too)."""
        while self._tx is not None:
            held = list(self.held)
            self.commit()
            for conn in held:
                if conn.inbuf and not conn.closed:
                    conn.process()
                    conn.update()
