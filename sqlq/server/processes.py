"""``--processes N``: N server processes on one port, and the parent that supervises them.

One Python process pays several times beanstalkd's CPU per command, and beanstalkd
uses one core. The queue is the file (or PostgreSQL), not the server's memory, so N
processes can each serve their own connections over the same queue: a connection
lives in one process (its reservations, watched tubes, the jobs it gives back when it
closes), and a reserve blocked in one process is woken by a commit in another as by
any other writer (waiters.py: the backend's notifier).

How they share the port. TCP on Linux: SO_REUSEPORT. Each child gets a listening
socket of its own, bound to the same address, and the kernel spreads new connections
over them by a hash of the connection's addresses; no process sits between a client
and its server, and one child's death resets only the connections queued on its own
socket. The parent makes each child's socket before it starts the child, so the port
listens from the parent's first milliseconds (a drop-in beanstalkd is connected to
100 ms after exec) and a bind error is the parent's, reported before anything runs. It
keeps one more socket bound to the port but not listening (a listening one would take
its share of connections and never accept them): the port stays this server's while
children restart, and port 0 resolves once. Elsewhere (unix sockets; BSD and macOS,
whose SO_REUSEPORT gives every connection to the last socket bound): one listening
socket, inherited by every child, each taking one connection per wake-up.

Not one acceptor handing sockets over (SCM_RIGHTS): that is a hop per connection and
one more process whose death stops every new connection; with SO_REUSEPORT the kernel
is the acceptor.

Run as a command of its own (``sqlq serve``, ``sqlq-beanstalkd``), the parent forks its
children (``core/forking.py``): it has closed the Queue it opened to create or migrate
the file, and holds no thread, so a child starts in milliseconds, not an interpreter's
0.3-0.5 s of CPU, and shares the parent's memory. Run inside another program (the
functions called from Python) it cannot vouch for that process, and starts each child
as a fresh interpreter. Each child reads one end of a pipe whose other end only the
parent holds: when the parent dies, SIGKILL included, the pipe reads end-of-file and
the child stops as on SIGTERM, giving its reserved jobs back. A child that dies is
started again, at once after a long life, after a growing pause (BACKOFF_FIRST,
doubling up to BACKOFF_MAX) when it keeps dying young. SIGTERM and SIGINT stop the
children (each stops as one server does) and then the parent; SIGUSR1 (drain mode) is
passed on, and children started later drain too.

``stats`` is per process: each child keeps its own counters (``cmd-*``,
``total-jobs``, connections, waiting reserves, ``pid``, ``uptime``, ``id``; ``pid``
tells them apart); the job counts come from the queue, so they are
the same from every process.
"""

from __future__ import annotations

import os
import selectors
import signal
import socket
import sys
import time

from sqlq.core.forking import ChildExit, Forked, fork, restore_signals
from sqlq.server.loop import log
from sqlq.server.net import address_of, bind, shares_port, unlink_unix
from sqlq.server.running import binlog_location, catch_signals, serve_opening, set_verbosity

TYPE_CHECKING = False
if TYPE_CHECKING:  # (json and subprocess are imported once bound: see beanstalkd_group)
    import subprocess
    from collections.abc import Callable
    from typing import Any

    from sqlq.queue import Queue
    from sqlq.server.flags import Flags

BACKOFF_FIRST = 0.1
"""Seconds before a child that died young starts again; doubled each time it does."""
BACKOFF_MAX = 10.0
HEALTHY = 10.0
"""A child that ran this long before it died is started again after BACKOFF_FIRST."""
STOP_WAIT = 10.0
"""Seconds children have to stop on SIGTERM before they are killed."""
EXIT_CANNOT_OPEN = 78
"""A child's exit status when it cannot open the queue (EX_CONFIG): the group stops,
as one server does, instead of starting it again and again."""

_CHILD = "from sqlq.server.processes import child_main; child_main()"


class Child:
    """One server process of the group, by its number (1..N)."""

    def __init__(self, index: int) -> None:
        self.index = index
        self.proc: subprocess.Popen[bytes] | Forked | None = None
        self.pipe = -1  # the parent's end of the pipe the child watches
        self.started = 0.0
        self.failures = 0  # deaths in a row, each soon after its start
        self.restart_at: float | None = None

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None


class Group:
    """The parent: N children on one port, started, watched, restarted and stopped.

    Args:
        listen: the ``--listen`` address (``HOST:PORT``, ``unix:PATH``; port 0: any).
        count: how many server processes.
        spec: what every child needs to open the queue and serve it (``child_main``):
            ``location``, ``queue`` (Queue keywords), ``max_job_size``,
            ``max_buffered``, ``verbose``.
        name: the program's name, for messages.
        fork: fork the children (the caller's process holds nothing that must not cross
            a fork) instead of starting new interpreters.

    Raises:
        ValueError, OSError: ``listen`` is not an address, or cannot be bound.
    """

    def __init__(self, listen: str, count: int, spec: dict[str, Any], name: str, *,
                 fork: bool = False) -> None:
        self.count, self.spec, self.name, self.fork = count, spec, name, fork
        self.reuse_port = shares_port(listen)
        self.holder = bind(listen, reuse_port=self.reuse_port, listening=not self.reuse_port)
        self.address = address_of(self.holder)
        self.children = [Child(i + 1) for i in range(count)]
        self.stopping = False
        self.draining = False
        self.fatal = False
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_r.setblocking(False)
        self._wake_w.setblocking(False)
        self._previous: dict[int, Any] = {}  # the handlers before the parent's

    def run(self, ready: Callable[[str], Any] | None = None) -> int:
        """Start the children and supervise them until SIGTERM or SIGINT; the exit status."""
        self._handle_signals()
        try:
            for child in self.children:
                self._start(child)
            if ready is not None:
                ready(self.address)
            log().info("listening on %s with %d processes", self.address, self.count)
            while not self.stopping:
                self._wait()
                self._reap()
                self._restart_due()
            return 1 if self.fatal else 0
        finally:
            self._stop_all()
            signal.set_wakeup_fd(-1)
            self.close()

    def close(self) -> None:
        """Give the port (and a unix socket's file) back."""
        if self.holder.family == socket.AF_UNIX:
            unlink_unix(self.holder)
        self.holder.close()
        self._wake_r.close()
        self._wake_w.close()

    def _handle_signals(self) -> None:
        signal.set_wakeup_fd(self._wake_w.fileno(), warn_on_full_buffer=False)

        def stop(*_: object) -> None:
            self.stopping = True

        def drain(*_: object) -> None:
            self.draining = True
            self._signal_all(signal.SIGUSR1)

        handlers = {signal.SIGTERM: stop, signal.SIGINT: stop, signal.SIGUSR1: drain,
                    signal.SIGCHLD: lambda *_: None}  # SIGCHLD only wakes the wait
        self._previous = {sig: signal.signal(sig, handler) for sig, handler in handlers.items()}

    def _start(self, child: Child) -> None:
        """Start ``child`` with its socket and its end of the parent's pipe."""
        sock = (bind(self.address, reuse_port=True) if self.reuse_port else self.holder)
        watch, pipe = os.pipe()
        spec = dict(self.spec, fd=sock.fileno(), watch=watch,
                    shared=not self.reuse_port, draining=self.draining)
        try:
            child.proc = self._fork(spec, pipe) if self.fork else self._spawn(spec)
        except BaseException:
            os.close(pipe)
            raise
        finally:
            os.close(watch)
            if sock is not self.holder:
                sock.close()  # the child's now
        child.pipe = pipe
        child.started = time.monotonic()
        child.restart_at = None

    def _spawn(self, spec: dict[str, Any]) -> subprocess.Popen[bytes]:
        """A new interpreter running :func:`child_main`, given ``spec`` on its stdin (not
        in argv, where ps would show a URL's password)."""
        import json
        import subprocess

        proc = subprocess.Popen([sys.executable, "-c", _CHILD],
                                pass_fds=(spec["fd"], spec["watch"]), stdin=subprocess.PIPE)
        assert proc.stdin is not None
        try:
            with proc.stdin as stdin:
                stdin.write(json.dumps(spec).encode())
        except BrokenPipeError:
            pass  # it died at once: reaped, and started again, as any death
        return proc

    def _fork(self, spec: dict[str, Any], pipe: int) -> Forked:
        pid = fork()
        if pid == 0:
            with ChildExit():
                self._become_child(spec, pipe)
        return Forked(pid)

    def _become_child(self, spec: dict[str, Any], pipe: int) -> None:
        """In a forked child: give back what is the parent's (its signal handlers, its
        wake-up socket, the port it holds, its ends of the children's pipes: the pipe must
        read end-of-file when the parent dies), take /dev/null for stdin as a started
        child's reads its spec to the end, and serve."""
        restore_signals(self._previous)
        self._wake_r.close()
        self._wake_w.close()
        if self.reuse_port:
            self.holder.close()  # the child listens on a socket of its own
        for fd in (pipe, *(c.pipe for c in self.children if c.proc is not None)):
            os.close(fd)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.close(null)
        serve_child(spec)

    def _wait(self) -> None:
        """Sleep until a signal (a child's death is one) or the next restart is due."""
        due = [c.restart_at for c in self.children if c.restart_at is not None]
        timeout = max(min(due) - time.monotonic(), 0.0) if due else None
        with selectors.DefaultSelector() as sel:
            sel.register(self._wake_r, selectors.EVENT_READ)
            sel.select(timeout)
        try:
            while self._wake_r.recv(4096):
                pass
        except OSError:
            pass

    def _reap(self) -> None:
        """Note the children that died, and when each starts again."""
        for child in self.children:
            proc = child.proc
            if proc is None or proc.poll() is None:
                continue
            child.proc = None
            os.close(child.pipe)
            if proc.returncode == EXIT_CANNOT_OPEN:
                self.fatal = self.stopping = True
                return
            lived = time.monotonic() - child.started
            child.failures = 0 if lived >= HEALTHY else child.failures + 1
            pause = min(BACKOFF_FIRST * 2 ** max(child.failures - 1, 0), BACKOFF_MAX)
            child.restart_at = time.monotonic() + pause
            log().warning("process %d/%d (pid %d) exited with status %s after %.1f s;"
                          " starting it again in %.1f s", child.index, self.count, proc.pid,
                          proc.returncode, lived, pause)

    def _restart_due(self) -> None:
        now = time.monotonic()
        for child in self.children:
            if not self.stopping and child.restart_at is not None and child.restart_at <= now:
                try:
                    self._start(child)
                except OSError as e:  # the port or the process table is full: try again
                    child.restart_at = now + BACKOFF_MAX
                    log().warning("process %d/%d cannot start: %s", child.index,
                                  self.count, e)

    def _signal_all(self, signum: int) -> None:
        for child in self.children:
            if child.alive():
                assert child.proc is not None
                try:
                    child.proc.send_signal(signum)
                except OSError:
                    pass

    def _stop_all(self) -> None:
        """SIGTERM to every child; SIGKILL to those still there after STOP_WAIT."""
        import subprocess
        self._signal_all(signal.SIGTERM)
        deadline = time.monotonic() + STOP_WAIT
        for child in self.children:
            if child.proc is None:
                continue
            try:
                child.proc.wait(max(deadline - time.monotonic(), 0.0))
            except subprocess.TimeoutExpired:
                child.proc.kill()
                child.proc.wait()
            os.close(child.pipe)
            child.proc = None


def serve_processes(location: str, listen: str, count: int, *, queue: dict[str, Any],
                    max_job_size: int, max_buffered: int | None = None, verbose: int = 0,
                    ready: Callable[[str], Any] | None = None,
                    name: str = "sqlq serve", fork: bool = False) -> int:
    """Serve the queue at ``location`` from ``count`` processes sharing ``listen``, until
    SIGTERM or SIGINT; the exit status (1: a process could not open the queue).

    ``queue``: the keywords each process opens ``sqlq.Queue(location, **queue)`` with;
    ``fork``: fork them (see the module docstring), for a caller run as a command.

    Raises:
        ValueError, OSError: ``listen`` is not an address, or cannot be bound.
    """
    spec = {"location": location, "queue": queue, "max_job_size": max_job_size,
            "max_buffered": max_buffered, "verbose": verbose, "name": name}
    return Group(listen, count, spec, name, fork=fork).run(ready)


def beanstalkd_group(flags: Flags, *, fork: bool = False) -> int:
    """``sqlq-beanstalkd -P N``: the drop-in binary's flags, served from N processes.

    It binds first, as one process does (clients connect 100 ms after exec); without
    ``-b`` the processes share one temporary directory, removed at exit.
    """
    set_verbosity(flags.verbose)
    try:
        group = Group(flags.listen, flags.processes, {
            "queue": {"durability": flags.durability, "max_job_size": flags.max_job_size},
            "max_job_size": flags.max_job_size, "max_buffered": None,
            "verbose": flags.verbose, "name": "sqlq-beanstalkd"}, "sqlq-beanstalkd",
            fork=fork)
    except (OSError, ValueError) as e:
        sys.stderr.write(f"sqlq-beanstalkd: cannot listen on {flags.listen}: {e}\n")
        return 1
    import tempfile

    temp = None if flags.binlog_dir else tempfile.mkdtemp(prefix="sqlq-beanstalkd-")
    try:
        directory = flags.binlog_dir or temp
        assert directory is not None
        try:
            group.spec["location"] = binlog_location(directory)
        except OSError as e:
            group.close()
            sys.stderr.write(f"sqlq-beanstalkd: {e}\n")
            return 1
        return group.run()
    finally:
        if temp is not None:
            import shutil

            shutil.rmtree(temp, ignore_errors=True)


def child_main() -> None:
    """One process of the group, started as a new interpreter, its spec on stdin
    (``Group._spawn``)."""
    import json

    serve_child(json.loads(sys.stdin.buffer.read()))


def serve_child(spec: dict[str, Any]) -> None:
    """One process of the group: serve its socket until stopped, or until the parent's
    pipe reads end-of-file; exit EXIT_CANNOT_OPEN when the queue cannot be opened."""
    from sqlq.server.core import Server

    set_verbosity(spec["verbose"])
    server = Server(None, max_job_size=spec["max_job_size"], max_buffered=spec["max_buffered"])
    server.draining = spec["draining"]
    server.owns_listeners = False  # a unix socket's file is the parent's to remove
    if spec["shared"]:
        server.accept_batch = 1  # one listener for all: take a connection, leave the rest
    catch_signals(server)
    address = server.listen(sock=socket.socket(fileno=spec["fd"]))
    watch = spec["watch"]
    os.set_blocking(watch, False)
    server.loop.register(watch, selectors.EVENT_READ, lambda _: server.stop())  # parent gone

    def open_queue() -> Queue:
        from sqlq.queue import Queue

        return Queue(spec["location"], **spec["queue"])

    failed = serve_opening(server, open_queue, address)
    if failed is not None:
        sys.stderr.write(f"{spec['name']}: {failed}\n")
        sys.exit(EXIT_CANNOT_OPEN)

