"""``sqlq serve`` and ``sqlq-beanstalkd``: the beanstalkd protocol over a Queue.

One thread runs one ``selectors`` loop, the shape of beanstalkd itself. Each
connection is a small state machine (a line, maybe a body, a reply); a reserve
that finds nothing parks the connection in a FIFO of waiters, served again
when a job may have become ready: a put or release through this server, a
commit by another process (the Queue's notifier fd becomes readable), or a
timer (a delayed job coming due, a TTR or pause running out, the reserve's own
timeout, the DEADLINE_SOON margin). SQLite statements take well under a
millisecond, so they run inline on the loop.

``sqlq-beanstalkd`` listens before it has even imported the Queue, and opens
its file in a thread while the loop already accepts and buffers commands;
commands that came in meanwhile are timed from their arrival (``attach``).

Why not asyncio: a drop-in beanstalkd must answer soon after exec (clients,
and greenstalk's test suite, connect 100 ms after starting it, and time
replies to 50 ms), and importing asyncio costs 20-50 ms on a small machine.
A selector loop costs nothing to import, and an idle connection is one object
with two byte buffers.
"""

from __future__ import annotations

import heapq
import itertools
import os
import selectors
import signal
import socket
import sys
import time
from collections import Counter
from collections.abc import Callable

from sqlq import beanstalk as bs
from sqlq.beanstalk import Command, ProtocolError, Reply, Verb
from sqlq.errors import Error, JobLost, JobNotFound, JobTooBig

# No typing, dataclasses or logging at import time: sqlq-beanstalkd imports this
# module before it can listen, and each of those costs milliseconds.
TYPE_CHECKING = False
if TYPE_CHECKING:
    import logging
    from typing import Any

    from sqlq.model import Job
    from sqlq.queue import Queue

DEFAULT_LISTEN = "127.0.0.1:11300"
READ_SIZE = 65536
HIGH_WATER = 1 << 20
"""Stop reading a client's commands while this many reply bytes wait for it."""
FALLBACK_RECHECK = 5.0
"""Waiters look again at least this often, whatever the notifier says."""
NOTIFY_RECHECKS = (0.002, 0.02)
"""After a commit event, look again: the commit may not be visible yet."""
ACCEPT_PAUSE = 0.1
"""How long to stop accepting when the process is out of file descriptors."""
MIN_NOTIFY_GAP = 0.001
"""Other processes' commits wake the waiters at most this often (a busy file stays cheap)."""
_DEFAULT = "default"
_MAX_ID = 2**63 - 1  # SQLite's integers: a larger id names no job
_BY_ID = frozenset({Verb.PEEK, Verb.RESERVE_JOB, Verb.DELETE, Verb.RELEASE, Verb.BURY,
                    Verb.TOUCH, Verb.KICK_JOB, Verb.STATS_JOB})


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def _log() -> logging.Logger:
    import logging

    return logging.getLogger("sqlq.server")


# ---- listening ---------------------------------------------------------------------------------


def bind(listen: str) -> socket.socket:
    """A non-blocking listening socket for ``HOST:PORT``, ``[V6]:PORT``, ``HOST`` or ``unix:PATH``.

    Raises:
        ValueError: ``listen`` is not of one of those forms.
        OSError: the address cannot be bound.
    """
    if listen.startswith("unix:"):
        path = listen[5:]
        if not path:
            raise ValueError("listen: unix: needs a path")
        try:
            if os.path.exists(path) and not os.path.isfile(path):
                os.unlink(path)  # a stale socket of an earlier run, as beanstalkd does
        except OSError:
            pass
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.bind(path)
    else:
        host, port = _host_port(listen)
        family, kind, proto, _, addr = socket.getaddrinfo(
            host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)[0]
        sock = socket.socket(family, kind, proto)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(addr)
    sock.listen(1024)
    sock.setblocking(False)
    return sock


def _host_port(listen: str) -> tuple[str, int]:
    host, sep, port = listen.rpartition(":")
    if not sep or "]" in port:
        host, port = listen, str(bs.DEFAULT_PORT)
    host = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    if not host or not port.isdigit() or int(port) > 65535:
        raise ValueError(f"listen must be HOST:PORT or unix:PATH, not {listen!r}")
    return host, int(port)


def address_of(sock: socket.socket) -> str:
    """The bound address in ``--listen`` form (the real port when 0 was asked for)."""
    name = sock.getsockname()
    if sock.family == socket.AF_UNIX:
        return f"unix:{name}"
    host = f"[{name[0]}]" if sock.family == socket.AF_INET6 else name[0]
    return f"{host}:{name[1]}"


# ---- the loop ----------------------------------------------------------------------------------


def _guard(fn: Callable[..., None], *args: int) -> None:
    """A bug or an I/O error in one callback is logged; the server goes on serving."""
    try:
        fn(*args)
    except Exception:
        _log().exception("internal error")


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
                _guard(key.data, mask)
            now = time.monotonic()
            while self._timers and self._timers[0][0] <= now and not self.stopping:
                _, _, timer = heapq.heappop(self._timers)
                if not timer.cancelled:
                    timer.cancelled = True
                    _guard(timer.fn)

    def close(self) -> None:
        self.selector.close()
        self._wake_r.close()
        self._wake_w.close()


# ---- a client connection -----------------------------------------------------------------------


class Held:
    """A job this connection reserved: what it needs to act on it and to time it."""

    __slots__ = ("lease", "until", "tube")

    def __init__(self, lease: int, until: int, tube: str) -> None:
        self.lease = lease
        self.until = until  # reserved_until, ms since the epoch
        self.tube = tube


class Wait:
    """A reserve waiting for a job."""

    __slots__ = ("tubes", "deadline")

    def __init__(self, tubes: tuple[str, ...], deadline: float | None) -> None:
        self.tubes = tubes
        self.deadline = deadline  # time.monotonic() of TIMED_OUT, None: wait for ever


class Conn:
    """One client: its buffers, where it is in the protocol, and its use/watch state."""

    def __init__(self, server: Server, sock: socket.socket) -> None:
        self.server = server
        self.sock = sock
        self.inbuf = bytearray()
        self.outbuf = bytearray()
        self.mask = 0
        self.eof = False         # the client sent FIN: answer what is buffered, then close
        self.closing = False     # close once outbuf is flushed
        self.closed = False
        self.overlong = False    # discarding a line longer than LINE_MAX up to its CRLF
        self.pending: Command | None = None  # a put whose body is still arriving
        self.discard = 0         # bytes of a too-big body still to throw away
        self.discard_reply = b""
        self.waiting = False
        self.arrived: float | None = None  # when unanswered input came in before the file was open
        self.use = _DEFAULT
        self.watch = [_DEFAULT]
        self.reserved: dict[int, Held] = {}
        self.producer = False
        self.worker = False

    # -- I/O --

    def on_event(self, mask: int) -> None:
        if self.closed:  # closed by an earlier callback of the same select() round
            return
        try:
            if mask & selectors.EVENT_WRITE:
                self._flush()
            if mask & selectors.EVENT_READ and not self.closed:
                self._read()
            self._update()
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
                self.server.answer(self, Reply.TIMED_OUT)
        if self.arrived is None and not self.server.ready:
            self.arrived = time.monotonic()
        self.inbuf += data
        self.process()

    def process(self) -> None:
        """Run every complete command in the input, in order, until one has to wait."""
        if not self.server.ready:
            return
        while not (self.closed or self.closing or self.waiting) and len(self.outbuf) < HIGH_WATER:
            if self.discard:
                n = min(self.discard, len(self.inbuf))
                del self.inbuf[:n]
                self.discard -= n
                if self.discard:
                    break
                self.send(self.discard_reply)
            elif self.pending is not None:
                need = self.pending.ints[3] + 2
                if len(self.inbuf) < need:
                    break
                body = bytes(self.inbuf[:need])
                del self.inbuf[:need]
                cmd, self.pending = self.pending, None
                self.send(self.server.put(self, cmd, body))
            else:
                end = self.inbuf.find(b"\r\n")
                if end < 0:
                    if len(self.inbuf) > bs.LINE_MAX:  # keep a last byte: it may be the \r
                        del self.inbuf[:-1]
                        self.overlong = True
                    break
                line = bytes(self.inbuf[:end])
                del self.inbuf[:end + 2]
                if self.overlong:
                    self.overlong = False
                    self.send(Reply.BAD_FORMAT)
                else:
                    self.server.dispatch(self, line)
        if self.eof and not self.waiting and not self.closed:
            self.close_after_flush()

    def send(self, data: bytes) -> None:
        if self.closed:
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

    def _update(self) -> None:
        """Ask the selector for what this connection can use next."""
        if self.closed:
            return
        limit = READ_SIZE + bs.LINE_MAX + (self.pending.ints[3] + 2 if self.pending else 0)
        mask = 0
        if not self.eof and not self.closing and len(self.inbuf) < limit:
            mask |= selectors.EVENT_READ
        if self.outbuf:
            mask |= selectors.EVENT_WRITE
        if mask == self.mask:
            return
        sel = self.server.loop.selector
        if not self.mask:
            sel.register(self.sock, mask, self.on_event)
        elif not mask:
            sel.unregister(self.sock)
        else:
            sel.modify(self.sock, mask, self.on_event)
        self.mask = mask

    def close_after_flush(self) -> None:
        self.closing = True
        if not self.outbuf:
            self.close()

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        if self.mask:
            self.server.loop.selector.unregister(self.sock)
            self.mask = 0
        self.sock.close()
        self.server.on_close(self)


# ---- the server --------------------------------------------------------------------------------


class Server:
    """beanstalkd's commands over one Queue, for any number of connections.

    Counters that beanstalkd keeps in memory (``cmd-*``, ``total-jobs``, the
    per-tube ``cmd-delete``...) live here and start at zero; job counts come
    from the file, so they include what library users and other servers did.
    """

    def __init__(self, queue: Queue | None, *, max_job_size: int | None = None) -> None:
        self._queue = queue
        if max_job_size is None:
            assert queue is not None, "max_job_size is needed until the queue is attached"
            max_job_size = queue.max_job_size
        self.max_job_size = max_job_size
        self._skew = 0.0  # seconds a command waited for the file to open (see attach)
        self.loop = Loop()
        self.conns: set[Conn] = set()
        self.waiters: dict[Conn, Wait] = {}  # in arrival order: the first waiter is served first
        self.draining = False
        self.cmds: Counter[str] = Counter()
        self.tube_counts: Counter[tuple[str, str]] = Counter()
        self.total_jobs = 0
        self.total_connections = 0
        self.job_timeouts = 0
        self.started = time.monotonic()
        self.instance_id = os.urandom(8).hex()
        self.listeners: list[socket.socket] = []
        self._timer: Timer | None = None
        self._watching_file = False  # the notifier is set up when a reserve first waits
        self._dirty = False      # a job may have become ready since the last pass
        self._rechecking = False
        self._reap = False       # look for dead reservation holders on the next pass
        self._last_reap = 0.0
        self._last_pass = 0.0
        self._handlers: dict[Verb, Callable[[Conn, Command], bytes]] = {
            Verb.PEEK: self._peek, Verb.PEEK_READY: self._peek_in_tube,
            Verb.PEEK_DELAYED: self._peek_in_tube, Verb.PEEK_BURIED: self._peek_in_tube,
            Verb.RESERVE_JOB: self._reserve_job, Verb.DELETE: self._delete,
            Verb.RELEASE: self._release, Verb.BURY: self._bury, Verb.TOUCH: self._touch,
            Verb.KICK: self._kick, Verb.KICK_JOB: self._kick_job, Verb.STATS: self._stats,
            Verb.STATS_JOB: self._stats_job, Verb.STATS_TUBE: self._stats_tube,
            Verb.USE: self._use, Verb.WATCH: self._watch, Verb.IGNORE: self._ignore,
            Verb.LIST_TUBES: self._list_tubes, Verb.LIST_TUBE_USED: self._list_tube_used,
            Verb.LIST_TUBES_WATCHED: self._list_tubes_watched, Verb.PAUSE_TUBE: self._pause_tube,
        }

    # -- lifecycle --

    @property
    def ready(self) -> bool:
        return self._queue is not None

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
        self._queue = queue
        for conn in list(self.conns):
            if conn.arrived is not None:
                self._skew = max(time.monotonic() - conn.arrived, 0.0)
                conn.arrived = None
                conn.process()
                conn._update()
        self._skew = 0.0

    def listen(self, listen: str | None = None, sock: socket.socket | None = None) -> str:
        """Start accepting on ``sock`` or a new socket bound to ``listen``; return the address."""
        sock = sock if sock is not None else bind(listen or DEFAULT_LISTEN)
        self.listeners.append(sock)
        self._watch_listener(sock)
        return address_of(sock)

    def _watch_listener(self, sock: socket.socket) -> None:
        self.loop.selector.register(sock, selectors.EVENT_READ, lambda _: self._accept(sock))

    def run(self) -> None:
        """Serve until ``stop()``; then close every connection (their jobs go back)."""
        try:
            self.loop.run()
        finally:
            for conn in list(self.conns):
                conn.close()
            for sock in self.listeners:
                if sock.family == socket.AF_UNIX:
                    try:
                        os.unlink(sock.getsockname())
                    except OSError:
                        pass
                sock.close()
            self.loop.close()

    def stop(self) -> None:
        """Make ``run()`` return; callable from a signal handler or another thread."""
        self.loop.stop()

    def drain(self) -> None:
        """Enter drain mode (SIGUSR1): puts answer DRAINING from now on."""
        self.draining = True

    def _accept(self, listener: socket.socket) -> None:
        for _ in range(64):
            try:
                sock, _addr = listener.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError as e:
                # Out of descriptors (EMFILE...): the listener stays readable, so stop
                # watching it for a moment instead of spinning on it.
                _log().warning("accept: %s; pausing accepts for %.1f s", e, ACCEPT_PAUSE)
                self.loop.selector.unregister(listener)
                self.loop.call_later(ACCEPT_PAUSE, lambda: self._watch_listener(listener))
                return
            sock.setblocking(False)
            if sock.family != socket.AF_UNIX:
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            conn = Conn(self, sock)
            self.conns.add(conn)
            self.total_connections += 1
            conn._update()

    def on_close(self, conn: Conn) -> None:
        """A closed connection's reservations go back to ready at once, as in beanstalkd."""
        self.conns.discard(conn)
        self.waiters.pop(conn, None)
        for job_id, held in conn.reserved.items():
            try:
                self.q.release(job_id, lease=held.lease)
            except Error:
                pass  # its TTR ran out, or it was deleted meanwhile
        if conn.reserved:
            conn.reserved.clear()
            self._poke()

    # -- commands --

    def dispatch(self, conn: Conn, line: bytes) -> None:
        """Run one command line and send its reply (a reserve may answer later)."""
        try:
            cmd = bs.parse_command(line, self.max_job_size)
        except ProtocolError as e:
            if e.verb is not None:
                self.cmds[e.verb.value] += 1
            if e.discard:
                conn.discard, conn.discard_reply = e.discard, e.reply
            else:
                conn.send(e.reply)
            return
        self.cmds[cmd.verb.value] += 1
        if cmd.verb is Verb.PUT:
            conn.producer = True
            conn.pending = cmd
        elif cmd.verb is Verb.QUIT:
            conn.inbuf.clear()
            conn.close_after_flush()
        elif cmd.verb is Verb.RESERVE:
            self._reserve(conn, None)
        elif cmd.verb is Verb.RESERVE_WITH_TIMEOUT:
            self._reserve(conn, cmd.ints[0])
        elif cmd.verb in _BY_ID and cmd.ints[0] > _MAX_ID:
            conn.send(Reply.NOT_FOUND)
        else:
            conn.send(self._guarded(self._handlers[cmd.verb], conn, cmd))

    def _guarded(self, handler: Callable[[Conn, Command], bytes], conn: Conn,
                 cmd: Command) -> bytes:
        """A failing database answers INTERNAL_ERROR to that one command; the server goes on."""
        try:
            return handler(conn, cmd)
        except Exception:
            _log().exception("%s failed", cmd.verb.value)
            return Reply.INTERNAL_ERROR

    def put(self, conn: Conn, cmd: Command, body: bytes) -> bytes:
        """The second half of put, once its body has arrived."""
        if body[-2:] != b"\r\n":
            return Reply.EXPECTED_CRLF
        if self.draining:
            return Reply.DRAINING
        return self._guarded(lambda c, m: self._insert(c, m, body[:-2]), conn, cmd)

    def _insert(self, conn: Conn, cmd: Command, body: bytes) -> bytes:
        pri, delay, ttr, _ = cmd.ints
        try:
            job_id = self.q.put(body, tube=conn.use, priority=pri, ttr=max(ttr, 1),
                                delay=max(delay - self._skew, 0.0) if delay else 0)
        except JobTooBig:
            return Reply.JOB_TOO_BIG
        self.total_jobs += 1
        self.tube_counts["total-jobs", conn.use] += 1
        self._poke()
        return bs.inserted(job_id)

    def _hold(self, conn: Conn, job: Job) -> bytes:
        assert job.lease is not None and job.reserved_until is not None
        conn.reserved[job.id] = Held(job.lease, job.reserved_until, job.tube)
        return bs.reserved(job.id, job.body)

    def _claim(self, conn: Conn, tubes: list[str] | tuple[str, ...],
               reap: bool = True) -> bytes | None:
        """Reserve the best ready job for ``conn``.

        With ``reap``, and nothing ready, first give back the reservations of
        processes that died (``reserve(timeout=0)`` does), which costs a look at
        each process holding reservations.
        """
        try:
            names = list(tubes)
            job = self.q.reserve(names, timeout=0) if reap else self.q.try_reserve(names)
        except Exception:
            _log().exception("reserve failed")
            return None
        return None if job is None else self._hold(conn, job)

    def _reserve(self, conn: Conn, timeout: int | None) -> None:
        conn.worker = True
        deadline = None if timeout is None else time.monotonic() + timeout - self._skew
        if timeout != 0:
            self._watch_file()  # before the first look, so that no commit slips by
        soon = self._deadline_soon(conn, now_ms())
        reply = self._claim(conn, conn.watch)
        if reply is None and soon:
            reply = Reply.DEADLINE_SOON
        elif reply is None and (timeout == 0 or conn.eof):
            reply = Reply.TIMED_OUT
        if reply is not None:
            conn.send(reply)
            return
        conn.waiting = True
        self.waiters[conn] = Wait(tuple(conn.watch), deadline)
        self._arm()

    def answer(self, conn: Conn, reply: bytes) -> None:
        """End a waiting reserve with ``reply`` and go on with the client's next commands."""
        self.waiters.pop(conn, None)
        conn.waiting = False
        conn.send(reply)
        conn.process()
        conn._update()

    def _deadline_soon(self, conn: Conn, now: int) -> bool:
        """True if a job this connection holds is in the last second of its TTR."""
        for job_id, held in list(conn.reserved.items()):
            if held.until <= now:  # timed out: the Queue already treats it as ready
                del conn.reserved[job_id]
                self.job_timeouts += 1
            elif held.until - bs.SAFETY_MARGIN_MS <= now and not self._still_held(job_id, held):
                del conn.reserved[job_id]  # deleted or released by an administrator meanwhile
        return any(h.until - bs.SAFETY_MARGIN_MS <= now for h in conn.reserved.values())

    def _still_held(self, job_id: int, held: Held) -> bool:
        job = self.q.peek(job_id)
        return job is not None and job.state == "reserved" and job.reserved_until == held.until

    def _reserve_job(self, conn: Conn, cmd: Command) -> bytes:
        conn.worker = True
        try:
            return self._hold(conn, self.q.reserve_job(cmd.ints[0]))
        except JobNotFound:
            return Reply.NOT_FOUND

    def _delete(self, conn: Conn, cmd: Command) -> bytes:
        job_id = cmd.ints[0]
        held = conn.reserved.pop(job_id, None)
        if held is not None:
            try:
                self.q.delete(job_id, lease=held.lease)
                self.tube_counts["cmd-delete", held.tube] += 1
                return Reply.DELETED
            except (JobLost, JobNotFound):
                pass  # its TTR ran out: it may still be deleted as a ready job
        # Ready, delayed and buried jobs may be deleted by anyone, reserved ones only by
        # their holder: take the job unless someone holds it, then delete it under our
        # own lease, so that a worker that reserves it in between keeps it.
        try:
            job = self.q.reserve_job(job_id)
            assert job.lease is not None
            self.q.delete(job_id, lease=job.lease)
        except (JobLost, JobNotFound):
            return Reply.NOT_FOUND
        self.tube_counts["cmd-delete", job.tube] += 1
        return Reply.DELETED

    def _release(self, conn: Conn, cmd: Command) -> bytes:
        job_id, pri, delay = cmd.ints
        held = conn.reserved.pop(job_id, None)
        if held is None:
            return Reply.NOT_FOUND
        try:
            self.q.release(job_id, priority=pri, delay=delay, lease=held.lease)
        except (JobLost, JobNotFound):
            return Reply.NOT_FOUND
        self._poke()
        return Reply.RELEASED

    def _bury(self, conn: Conn, cmd: Command) -> bytes:
        job_id, pri = cmd.ints
        held = conn.reserved.pop(job_id, None)
        if held is None:
            return Reply.NOT_FOUND
        try:
            self.q.bury(job_id, priority=pri, lease=held.lease)
        except (JobLost, JobNotFound):
            return Reply.NOT_FOUND
        return Reply.BURIED

    def _touch(self, conn: Conn, cmd: Command) -> bytes:
        held = conn.reserved.get(cmd.ints[0])
        if held is None:
            return Reply.NOT_FOUND
        try:
            held.until = self.q.touch(cmd.ints[0], lease=held.lease)
        except (JobLost, JobNotFound):
            del conn.reserved[cmd.ints[0]]
            return Reply.NOT_FOUND
        if conn in self.waiters:
            self._arm()
        return Reply.TOUCHED

    def _peek(self, conn: Conn, cmd: Command) -> bytes:
        job = self.q.peek(cmd.ints[0])
        return Reply.NOT_FOUND if job is None else bs.found(job.id, job.body)

    def _peek_in_tube(self, conn: Conn, cmd: Command) -> bytes:
        peek = {Verb.PEEK_READY: self.q.peek_ready, Verb.PEEK_DELAYED: self.q.peek_delayed,
                Verb.PEEK_BURIED: self.q.peek_buried}[cmd.verb]
        job = peek(conn.use)
        return Reply.NOT_FOUND if job is None else bs.found(job.id, job.body)

    def _kick(self, conn: Conn, cmd: Command) -> bytes:
        count = self.q.kick(cmd.ints[0], tube=conn.use)
        if count:
            self._poke()
        return bs.kicked(count)

    def _kick_job(self, conn: Conn, cmd: Command) -> bytes:
        try:
            self.q.kick_job(cmd.ints[0])
        except JobNotFound:
            return Reply.NOT_FOUND
        self._poke()
        return Reply.KICKED

    def _use(self, conn: Conn, cmd: Command) -> bytes:
        conn.use = cmd.tube
        return bs.using(conn.use)

    def _watch(self, conn: Conn, cmd: Command) -> bytes:
        if cmd.tube not in conn.watch:
            conn.watch.append(cmd.tube)
        return bs.watching(len(conn.watch))

    def _ignore(self, conn: Conn, cmd: Command) -> bytes:
        if cmd.tube in conn.watch:
            if len(conn.watch) < 2:
                return Reply.NOT_IGNORED
            conn.watch.remove(cmd.tube)
        return bs.watching(len(conn.watch))

    def _list_tubes(self, conn: Conn, cmd: Command) -> bytes:
        return bs.ok(bs.yaml_list(self.tubes()))

    def _list_tube_used(self, conn: Conn, cmd: Command) -> bytes:
        return bs.using(conn.use)

    def _list_tubes_watched(self, conn: Conn, cmd: Command) -> bytes:
        return bs.ok(bs.yaml_list(conn.watch))

    def _pause_tube(self, conn: Conn, cmd: Command) -> bytes:
        if cmd.tube not in self.tubes():
            return Reply.NOT_FOUND
        delay = cmd.ints[0]
        self.q.pause_tube(cmd.tube, max(delay - self._skew, 0.001) if delay else 0)
        self.tube_counts["cmd-pause-tube", cmd.tube] += 1
        self._poke()
        return Reply.PAUSED

    # -- stats --

    def tubes(self) -> list[str]:
        """Tubes as beanstalkd sees them: ``default``, those with jobs, those a client names."""
        names = dict.fromkeys([_DEFAULT, *self.q.tubes()])
        for conn in self.conns:
            names.update(dict.fromkeys([conn.use, *conn.watch]))
        return list(names)

    def _stats(self, conn: Conn, cmd: Command) -> bytes:
        file_stats = self.q.stats()
        usage = _rusage()
        uname = os.uname()
        values: dict[str, bs.Scalar] = {
            k: file_stats[k] for k in bs.STATS_KEYS if k.startswith("current-jobs-")}
        values.update({k: self.cmds[k[4:]] for k in bs.STATS_KEYS if k.startswith("cmd-")})
        values.update({
            "job-timeouts": self.job_timeouts, "total-jobs": self.total_jobs,
            "max-job-size": self.max_job_size, "current-tubes": len(self.tubes()),
            "current-connections": len(self.conns),
            "current-producers": sum(c.producer for c in self.conns),
            "current-workers": sum(c.worker for c in self.conns),
            "current-waiting": len(self.waiters), "total-connections": self.total_connections,
            "pid": os.getpid(), "version": _version(), "rusage-utime": usage[0],
            "rusage-stime": usage[1], "uptime": int(time.monotonic() - self.started),
            "binlog-oldest-index": 0, "binlog-current-index": 0, "binlog-records-migrated": 0,
            "binlog-records-written": 0, "binlog-max-size": 10485760,
            "draining": self.draining, "id": self.instance_id, "hostname": uname.nodename,
            "os": uname.version, "platform": uname.machine,
        })
        return bs.ok(bs.yaml_dict(bs.STATS_KEYS, values))

    def _stats_job(self, conn: Conn, cmd: Command) -> bytes:
        try:
            values = self.q.stats_job(cmd.ints[0])
        except JobNotFound:
            return Reply.NOT_FOUND
        values["file"] = 0
        return bs.ok(bs.yaml_dict(bs.STATS_JOB_KEYS, values))

    def _stats_tube(self, conn: Conn, cmd: Command) -> bytes:
        tube = cmd.tube
        if tube not in self.tubes():
            return Reply.NOT_FOUND
        try:
            values = self.q.stats_tube(tube)
        except JobNotFound:  # named by a client, nothing in the file yet
            values = dict.fromkeys(bs.STATS_TUBE_KEYS, 0)
        values.update({
            "name": tube, "total-jobs": self.tube_counts["total-jobs", tube],
            "current-using": sum(c.use == tube for c in self.conns),
            "current-watching": sum(tube in c.watch for c in self.conns),
            "current-waiting": sum(tube in w.tubes for w in self.waiters.values()),
            "cmd-delete": self.tube_counts["cmd-delete", tube],
            "cmd-pause-tube": self.tube_counts["cmd-pause-tube", tube],
        })
        return bs.ok(bs.yaml_dict(bs.STATS_TUBE_KEYS, values))

    # -- serving waiters --

    def _poke(self) -> None:
        """Something here may have made a job ready: serve the waiters on the next turn."""
        self._dirty = True
        self._serve_soon(0.0)

    def _serve_soon(self, delay: float) -> None:
        """Serve the waiters within ``delay`` seconds (keeping an earlier timer)."""
        timer = self._timer
        due = time.monotonic() + delay
        if self.waiters and (timer is None or timer.cancelled or timer.when > due):
            self._set_timer(delay)

    def _watch_file(self) -> None:
        """Learn of other processes' commits, from the first waiting reserve on.

        Not at start: inotify costs milliseconds to set up (a drop-in beanstalkd must
        answer quickly), and a server nobody waits on has no use for the events.
        """
        if not self._watching_file:
            self._watching_file = True
            fd = self.q.notifier.fileno()
            if fd is not None:
                self.loop.selector.register(fd, selectors.EVENT_READ, self._on_notify)

    def _on_notify(self, mask: int) -> None:
        """Another process committed (or one holding reservations died)."""
        events = self.q.notifier.drain()
        if not (events and self.waiters):
            return
        self._dirty = True
        self._reap = self._reap or events.owner
        self._serve_soon(max(self._last_pass + MIN_NOTIFY_GAP - time.monotonic(), 0.0))
        if not self._rechecking:
            self._rechecking = True
            for delay in NOTIFY_RECHECKS:
                self.loop.call_later(delay, self._serve_waiters)
            self.loop.call_later(NOTIFY_RECHECKS[-1], self._end_recheck)

    def _end_recheck(self) -> None:
        self._rechecking = False

    def _serve_waiters(self) -> None:
        """Hand out jobs to waiters in arrival order; time out those whose time has come."""
        self._dirty = False
        now, mono = now_ms(), time.monotonic()
        self._last_pass = mono
        reap = self._reap or mono - self._last_reap >= FALLBACK_RECHECK
        if reap:
            self._reap, self._last_reap = False, mono
        empty: set[frozenset[str]] = set()
        for conn, wait in list(self.waiters.items()):
            if conn not in self.waiters:
                continue
            key = frozenset(wait.tubes)
            reply = None
            if key not in empty:
                reply = self._claim(conn, wait.tubes, reap)
                if reply is None:
                    empty.add(key)
            if reply is None and self._deadline_soon(conn, now):
                reply = Reply.DEADLINE_SOON
            elif reply is None and wait.deadline is not None and mono >= wait.deadline:
                reply = Reply.TIMED_OUT
            if reply is not None:
                self.answer(conn, reply)
        self._arm()

    def _arm(self) -> None:
        """Set the one timer to the next moment a waiter may need serving."""
        if not self.waiters:
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None
            return
        now, mono = now_ms(), time.monotonic()
        delay = FALLBACK_RECHECK if self.q.notifier.fileno() is not None else 0.05
        for key in {frozenset(w.tubes) for w in self.waiters.values()}:
            due = self.q.next_wakeup(sorted(key))
            if due is not None:
                delay = min(delay, due)
        for conn, wait in self.waiters.items():
            if wait.deadline is not None:
                delay = min(delay, wait.deadline - mono)
            for held in conn.reserved.values():
                delay = min(delay, (held.until - bs.SAFETY_MARGIN_MS - now) / 1000)
        self._set_timer(0.0 if self._dirty else max(delay, 0.001))

    def _set_timer(self, delay: float) -> None:
        if self._timer is not None:
            self._timer.cancel()
        self._timer = self.loop.call_later(delay, self._serve_waiters)


def _raise_fd_limit() -> None:
    """One descriptor per client: allow as many as the hard limit does (often 1024 by default)."""
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
        except (ValueError, OSError):
            pass


def _rusage() -> tuple[float, float]:
    import resource

    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime, usage.ru_stime


def _version() -> str:
    from sqlq import __version__

    return f"{bs.PROTOCOL_VERSION}+sqlq.{__version__}"


# ---- entry points ------------------------------------------------------------------------------


def serve(queue: Queue, listen: str = DEFAULT_LISTEN, *, max_job_size: int | None = None,
          sock: socket.socket | None = None, ready: Callable[[str], Any] | None = None,
          handle_signals: bool = True) -> None:
    """Serve the beanstalkd protocol over ``queue`` until SIGTERM or SIGINT.

    The protocol has no authentication: anyone who can connect can read,
    delete and add jobs. The default address is loopback only.

    Args:
        queue: the Queue to serve; its file may be shared with library users.
        listen: ``HOST:PORT``, ``[V6]:PORT`` or ``unix:PATH`` (port 0: any free port).
        max_job_size: the largest body a put may announce; default the queue's.
        sock: an already bound listening socket, instead of ``listen``.
        ready: called with the bound address once clients can connect.
        handle_signals: SIGTERM/SIGINT stop, SIGUSR1 enters drain mode (main thread only).
    """
    server = Server(queue, max_job_size=max_job_size)
    address = server.listen(listen, sock)
    _log().info("listening on %s", address)
    if ready is not None:
        ready(address)
    _run(server, handle_signals)


def _run(server: Server, handle_signals: bool) -> None:
    _raise_fd_limit()
    if handle_signals:
        _handle_signals(server)
    try:
        server.run()
    finally:
        if handle_signals:
            signal.set_wakeup_fd(-1)


def _handle_signals(server: Server) -> None:
    """SIGTERM and SIGINT stop the server cleanly, SIGUSR1 enters drain mode."""
    signal.set_wakeup_fd(server.loop.wakeup_fd(), warn_on_full_buffer=False)
    signal.signal(signal.SIGTERM, lambda *_: server.stop())
    signal.signal(signal.SIGINT, lambda *_: server.stop())
    signal.signal(signal.SIGUSR1, lambda *_: server.drain())


def beanstalkd_main(argv: list[str] | None = None) -> None:
    """``sqlq-beanstalkd``: beanstalkd's command line, served from a SQLite file.

    It listens first and opens the file in a thread meanwhile: clients may connect
    as soon as it is started (greenstalk's tests do, 100 ms after), and the imports
    and the schema take longer than that on a small machine.
    """
    try:
        flags = bs.parse_flags(sys.argv[1:] if argv is None else argv)
    except bs.UsageError as e:
        sys.stderr.write(f"sqlq-beanstalkd: {e}\n{bs.USAGE}")
        sys.exit(5)
    if flags.show_help:
        sys.stdout.write(bs.USAGE)
        return
    if flags.show_version:
        print(f"beanstalkd {_version()}")
        return
    server = Server(None, max_job_size=flags.max_job_size)
    _handle_signals(server)  # from the start: a SIGTERM must not leave a temporary directory
    try:
        address = server.listen(flags.listen)
    except (OSError, ValueError) as e:
        sys.stderr.write(f"sqlq-beanstalkd: cannot listen on {flags.listen}: {e}\n")
        sys.exit(1)
    import tempfile
    import threading

    temp = None if flags.binlog_dir else tempfile.mkdtemp(prefix="sqlq-beanstalkd-")
    directory = flags.binlog_dir or temp
    assert directory is not None
    opened: list[Queue] = []
    failed: list[BaseException] = []

    def load() -> None:
        try:
            from sqlq.queue import Queue

            os.makedirs(directory, exist_ok=True)
            queue = Queue(os.path.join(directory, "sqlq.db"), durability=flags.durability,
                          max_job_size=flags.max_job_size)
            opened.append(queue)
            server.loop.call_soon_threadsafe(lambda: server.attach(queue))
            _log().info("listening on %s, jobs in %s (%s)", address, queue.path, queue.durability)
        except BaseException as e:  # reported below, once the loop has stopped
            failed.append(e)
            server.stop()

    loader = threading.Thread(target=load, name="sqlq-open", daemon=True)
    loader.start()
    if flags.verbose:
        import logging

        logging.basicConfig(level=logging.WARNING - 10 * min(flags.verbose, 2),
                            format="sqlq-beanstalkd: %(message)s")
    try:
        _run(server, handle_signals=False)
    finally:
        signal.set_wakeup_fd(-1)
        loader.join()
        for queue in opened:
            queue.close()
        if temp is not None:
            import shutil

            shutil.rmtree(temp, ignore_errors=True)
    if failed:
        sys.stderr.write(f"sqlq-beanstalkd: {failed[0]}\n")
        sys.exit(1)


if __name__ == "__main__":
    beanstalkd_main()
