"""One client connection: its buffers, where it is in the protocol, its use/watch state.

A small state machine over an input buffer: a command line, or the body of a
put still arriving, or the body of a too-big put being thrown away. Replies go
straight to the socket when nothing is queued before them, else to ``outbuf``.
Backpressure: a client that stops reading its replies stops being read
(``HIGH_WATER``), and a client sending faster than it is served is read no
further than one read beyond the command it is on. A put body larger than one
read is read once the server-wide budget grants it memory (budget.py). While
the round's writes are not yet committed, replies wait in ``held`` (batch.py).
"""

from __future__ import annotations

import selectors
import time

from sqlq.server.protocol import DEFAULT_TUBE, LINE_MAX, Command, Reply, reserved

TYPE_CHECKING = False
if TYPE_CHECKING:
    import socket
    from typing import Protocol

    from sqlq.model import Job
    from sqlq.server.budget import Budget
    from sqlq.server.loop import Loop

    class Server(Protocol):
        """What a connection asks of its server (``core.Server``), named here so that the
        parts which act on connections (commands, waiters, batch, locks) stand above them."""

        @property
        def ready(self) -> bool: ...

        @property
        def loop(self) -> Loop: ...

        @property
        def budget(self) -> Budget: ...

        @property
        def batch(self) -> _Batch: ...

        @property
        def commands(self) -> _Commands: ...

        @property
        def waiters(self) -> _Waiters: ...

        def on_close(self, conn: Conn) -> None: ...

    class _Batch(Protocol):  # batch.Batch: the round's replies held until its commit
        @property
        def open(self) -> bool: ...

        @property
        def held(self) -> list[Conn]: ...

    class _Commands(Protocol):  # commands.Commands: what a command line or a body runs
        def dispatch(self, conn: Conn, line: bytes) -> None: ...

        def put(self, conn: Conn, cmd: Command, body: bytes) -> None: ...

    class _Waiters(Protocol):  # waiters.Waiters: a blocked reserve's answer
        def answer(self, conn: Conn, reply: bytes) -> None: ...

_READ, _WRITE = selectors.EVENT_READ, selectors.EVENT_WRITE
READ_SIZE = 65536
HIGH_WATER = 1 << 20
"""Stop reading a client's commands while this many reply bytes wait for it."""
TURN = 0.002
"""Seconds of commands a connection runs in one turn of the loop (at least one command);
while other connections wait (Loop.others_waiting), what is left of its pipeline goes
on in the next round, after their turns: a client pipelining slow commands (``stats``
on a big file) cannot hold the others up for longer than one command plus a turn. Time
rather than a count, so that a pipeline of cheap puts still shares a round's one commit
(batch.py) a hundred at a time."""


class Held:
    """A job this connection reserved: what it needs to act on it and to time it."""

    __slots__ = ("lease", "until", "tube")

    def __init__(self, lease: int, until: int, tube: str) -> None:
        self.lease = lease
        self.until = until  # reserved_until, ms since the epoch
        self.tube = tube


class Conn:
    """One client: its buffers, where it is in the protocol, and its use/watch state."""

    def __init__(self, server: Server, sock: socket.socket) -> None:
        self.server = server
        self.sock = sock
        self.inbuf = bytearray()
        self.outbuf = bytearray()
        self.held = bytearray()  # replies waiting for the round's commit (batch.py)
        self.mask = 0
        self.eof = False         # the client sent FIN: answer what is buffered, then close
        self.closing = False     # close once outbuf is flushed
        self.closed = False
        self.overlong = False    # discarding a line longer than LINE_MAX up to its CRLF
        self.pending: Command | None = None  # a put whose body is still arriving
        self.grant = 0           # bytes of the budget granted to the pending body
        self.discard = 0         # bytes of a too-big body still to throw away
        self.discard_reply = b""
        self.waiting = False     # in a blocking reserve (waiters.py)
        self.blocked = False     # a command waits for another process's write lock (locks.py)
        self.arrived: float | None = None  # when unanswered input came in before the file was open
        self.use = DEFAULT_TUBE
        self.watch = [DEFAULT_TUBE]
        self.reserved: dict[int, Held] = {}
        self.producer = False
        self.worker = False
        self.queued = False      # put off to the next round with commands left (TURN)

    def hold(self, job: Job) -> bytes:
        """Remember a job this client just reserved; the RESERVED reply for it."""
        assert job.lease is not None and job.reserved_until is not None
        self.reserved[job.id] = Held(job.lease, job.reserved_until, job.tube)
        return reserved(job.id, job.body)

    # -- I/O --

    def on_event(self, mask: int) -> None:
        if self.closed:  # closed by an earlier callback of the same select() round
            return
        try:
            if mask & _WRITE:
                self._flush()
            if mask & _READ and not self.closed:
                self._read()
            self.update()
        except Exception:
            self.close()  # this client only: its state can no longer be trusted
            raise

    def _read(self) -> None:
        try:
            data = self.sock.recv(READ_SIZE)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            self.close()
            return
        if not data:
            self.eof = True
            if self.waiting:  # beanstalkd answers a half-closed waiter at once
                self.server.waiters.answer(self, Reply.TIMED_OUT)
        if self.arrived is None and not self.server.ready:
            self.arrived = time.monotonic()
        self.inbuf += data
        self.process()

    def process(self) -> None:
        """Run the complete commands in the input, in order, until one has to wait or
        this connection's turn is used up (TURN: the rest goes on in the next round).
        The clock is read again only when more input follows a whole command (a
        put's check comes after its body)."""
        server = self.server
        if not server.ready or self.queued:
            return
        commands, inbuf = server.commands, self.inbuf
        turn_end = time.monotonic() + TURN
        while not (self.closed or self.closing or self.waiting or self.blocked):
            if (self.outbuf or self.held) and len(self.outbuf) + len(self.held) >= HIGH_WATER:
                break
            if self.discard:
                n = min(self.discard, len(inbuf))
                del inbuf[:n]
                self.discard -= n
                if self.discard:
                    break
                self.send(self.discard_reply)
                continue
            if self.pending is not None:
                need = self.pending.ints[3] + 2
                if len(inbuf) < need:
                    break
                body = bytes(inbuf[:need])
                del inbuf[:need]
                if need > READ_SIZE and not self.grant:  # it came whole within the reads
                    server.budget.give_back(self)  # any client may make: wait no more
                cmd, self.pending = self.pending, None
                commands.put(self, cmd, body)
                if self.grant and not self.blocked:  # stored: the memory goes to the next
                    server.budget.give_back(self)
            else:
                end = inbuf.find(b"\r\n")
                if end < 0:
                    if len(inbuf) > LINE_MAX:  # keep a last byte: it may be the \r
                        del inbuf[:-1]
                        self.overlong = True
                    break
                line = bytes(inbuf[:end])
                del inbuf[:end + 2]
                if self.overlong:
                    self.overlong = False
                    self.send(Reply.BAD_FORMAT)
                    continue
                commands.dispatch(self, line)
                if self.pending is not None:
                    continue  # a put: its body next, then the turn's check
            if inbuf and time.monotonic() >= turn_end:  # more input: is the turn over?
                if server.loop.others_waiting(self.sock.fileno()):
                    self.queued = True
                    server.loop.again(self._next_turn)
                    return
                turn_end = time.monotonic() + TURN
        if self.eof and not (self.waiting or self.blocked or self.closed):
            self.close_after_flush()

    def _next_turn(self) -> None:
        """The loop's next round: go on with the commands left from the last turn."""
        self.queued = False
        if not self.closed:
            self.process()
            self.update()

    def expect(self, cmd: Command) -> None:
        """A put's command line came: its body is next. One larger than a read waits
        for memory from the server's budget before it is read further."""
        self.pending = cmd
        need = cmd.ints[3] + 2
        if need > READ_SIZE:
            self.server.budget.ask(self, need)

    def answered(self, reply: bytes) -> None:
        """The command that waited for the write lock is answered (locks.py); a put's
        body, stored now, gives its memory back. Then on with the next commands."""
        self.blocked = False
        if self.grant:
            self.server.budget.give_back(self)
        self.send(reply)
        self.process()
        self.update()

    def send(self, data: bytes) -> None:
        if self.closed:
            return
        batch = self.server.batch
        if batch.open:  # after the commit (batch.py)
            if not self.held:
                batch.held.append(self)
            self.held += data
            return
        if not self.outbuf:
            try:
                sent = self.sock.send(data)
            except (BlockingIOError, InterruptedError):
                sent = 0
            except OSError:
                self.close()
                return
            data = data[sent:]
        self.outbuf += data

    def release_held(self) -> None:
        """The round's commit is durable: send the replies it held."""
        if self.held and not self.closed:
            data = bytes(self.held)
            self.held.clear()
            self.send(data)
            if self.closing and not self.outbuf:
                self.close()
            else:
                self.update()

    def _flush(self) -> None:
        try:
            sent = self.sock.send(self.outbuf)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            self.close()
            return
        blocked = len(self.outbuf) >= HIGH_WATER
        del self.outbuf[:sent]
        if self.closing and not self.outbuf:
            self.close()
        elif blocked and len(self.outbuf) < HIGH_WATER:
            self.process()

    def update(self) -> None:
        """Ask the selector for what this connection can use next."""
        if self.closed:
            return
        mask = 0
        if not self.eof and not self.closing and len(self.inbuf) < READ_SIZE + LINE_MAX + (
                self.grant if self.pending else 0):
            mask = _READ
        if self.outbuf:
            mask |= _WRITE
        if mask == self.mask:
            return
        loop = self.server.loop
        if not self.mask:
            loop.register(self.sock, mask, self.on_event)
        elif not mask:
            loop.unregister(self.sock)
        else:
            loop.modify(self.sock, mask, self.on_event)
        self.mask = mask

    def close_after_flush(self) -> None:
        self.closing = True
        if not (self.outbuf or self.held):
            self.close()

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        if self.mask:
            self.server.loop.unregister(self.sock)
            self.mask = 0
        self.sock.close()
        self.server.on_close(self)
