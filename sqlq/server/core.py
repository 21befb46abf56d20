"""The Server: one Queue, its listeners and connections, and their lifecycle.

It wires the pieces together (``Loop``, ``Conn``, ``Commands``, ``Waiters``,
``Stats``) and owns what spans connections: accepting, attaching the Queue
once its file is open, giving a closed connection's jobs back, stopping.
"""

from __future__ import annotations

import selectors
import socket
import time

from sqlq.errors import Error, Locked
from sqlq.server.batch import Batch
from sqlq.server.budget import Budget, default_max_buffered
from sqlq.server.commands import Commands
from sqlq.server.connection import Conn, Held
from sqlq.server.locks import LOCK_WAIT, LockWaits
from sqlq.server.loop import Loop, log
from sqlq.server.net import DEFAULT_LISTEN, address_of, bind, unlink_unix
from sqlq.server.stats import FileCounts, Stats
from sqlq.server.waiters import Waiters

TYPE_CHECKING = False
if TYPE_CHECKING:
    from sqlq.queue import Queue

ACCEPT_PAUSE = 0.1
"""How long to stop accepting when the process is out of file descriptors."""


class Server:
    """beanstalkd's commands over one Queue, for any number of connections."""

    def __init__(self, queue: Queue | None, *, max_job_size: int | None = None,
                 max_buffered: int | None = None) -> None:
        self._queue: Queue | None = None
        self.ready = False  # a queue is attached (an attribute: read for every input)
        if queue is not None:
            self._use(queue)
        if max_job_size is None:
            assert queue is not None, "max_job_size is needed until the queue is attached"
            max_job_size = queue.max_job_size
        self.max_job_size = max_job_size
        self.budget = Budget(max_buffered if max_buffered is not None
                             else default_max_buffered(max_job_size))
        self.skew = 0.0  # seconds a command waited for the file to open (see attach)
        self.loop = Loop()
        self.batch = Batch(self)
        self.loop.end_round = self.end_round
        self.conns: set[Conn] = set()
        self.draining = False
        self.listeners: list[socket.socket] = []
        self.owns_listeners = True  # unlink a unix socket's file at the end (processes.py)
        self.accept_batch = 64  # connections taken per wake-up of a listener
        self.stats = Stats()
        self.file_counts = FileCounts(self)
        self.waiters = Waiters(self)
        self.locks = LockWaits(self)
        self.commands = Commands(self)

    @property
    def q(self) -> Queue:
        assert self._queue is not None, "no queue attached yet"
        return self._queue

    def attach(self, queue: Queue) -> None:
        """Start answering with ``queue``, for a server that listened before its file was open.

        Commands that came in meanwhile are timed from their arrival: a ``put`` with
        a delay, a ``reserve-with-timeout`` and a ``pause-tube`` count the time
        they waited for the file, so the client sees beanstalkd's timings.
        """
        self._use(queue)
        for conn in list(self.conns):
            if conn.arrived is not None:
                self.skew = max(time.monotonic() - conn.arrived, 0.0)
                conn.arrived = None
                conn.process()
                conn.update()
        self.skew = 0.0

    def _use(self, queue: Queue) -> None:
        """Serve ``queue``, whose writes wait at most LOCK_WAIT for another process's
        lock: a loop blocked on the lock would serve nobody (locks.py)."""
        queue.lock_wait = LOCK_WAIT
        self._queue = queue
        self.ready = True

    def listen(self, listen: str | None = None, sock: socket.socket | None = None) -> str:
        """Start accepting on ``sock`` or a new socket bound to ``listen``; return the address."""
        sock = sock if sock is not None else bind(listen or DEFAULT_LISTEN)
        self.listeners.append(sock)
        self._watch_listener(sock)
        return address_of(sock)

    def _watch_listener(self, sock: socket.socket) -> None:
        self.loop.register(sock, selectors.EVENT_READ, lambda _: self._accept(sock))

    def run(self) -> None:
        """Serve until ``stop()``; then close every connection (their jobs go back)."""
        try:
            self.loop.run()
        finally:
            for conn in list(self.conns):
                conn.close()
            self.end_round()  # the closed connections' jobs given back
            self.waiters.close()
            for sock in self.listeners:
                if self.owns_listeners:
                    unlink_unix(sock)
                sock.close()
            self.loop.close()

    def end_round(self) -> None:
        """The loop round's end: commit its writes (batch.py), claim its deferred
        reserves together (waiters.py), and again for what their answers set going."""
        self.batch.end_round()
        while self.waiters.deferred:
            self.waiters.flush()
            self.batch.end_round()

    def stop(self) -> None:
        """Make ``run()`` return; callable from a signal handler or another thread."""
        self.loop.stop()

    def drain(self) -> None:
        """Enter drain mode (SIGUSR1): puts answer DRAINING from now on."""
        self.draining = True

    def _accept(self, listener: socket.socket) -> None:
        for _ in range(self.accept_batch):
            try:
                sock, _addr = listener.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError as e:
                # Out of descriptors (EMFILE...): the listener stays readable, so stop
                # watching it for a moment instead of spinning on it.
                log().warning("accept: %s; pausing accepts for %.1f s", e, ACCEPT_PAUSE)
                self.loop.unregister(listener)
                self.loop.call_later(ACCEPT_PAUSE, lambda: self._watch_listener(listener))
                return
            sock.setblocking(False)
            if sock.family != socket.AF_UNIX:
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            conn = Conn(self, sock)
            self.conns.add(conn)
            self.stats.total_connections += 1
            conn.update()

    def on_close(self, conn: Conn) -> None:
        """A closed connection's reservations go back to ready at once, as in beanstalkd."""
        self.conns.discard(conn)
        self.waiters.forget(conn)
        self.locks.forget(conn)
        self.budget.give_back(conn)
        if conn.reserved:
            jobs = dict(conn.reserved)
            conn.reserved.clear()
            self.locks.run(None, lambda: self.batch.run(
                lambda: self._give_back(jobs), durable=False, conn=None))

    def _give_back(self, jobs: dict[int, Held]) -> bytes:
        """Release a closed connection's jobs; Locked leaves the rest for a retry."""
        for job_id in list(jobs):
            try:
                self.q.release(job_id, lease=jobs[job_id].lease)
            except Locked:
                raise
            except Error:
                pass  # its TTR ran out, or it was deleted meanwhile
            del jobs[job_id]
        self.waiters.after("release")
        return b""
