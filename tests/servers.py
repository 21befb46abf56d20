"""The servers the tests run, one way each: ``sqlq-beanstalkd`` in its own process or in a
thread of the test, the real beanstalkd, PgBouncer in front of the test PostgreSQL, free
ports, and the programs a test requires."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

import pytest

import sqlq
from sqlq.server import Server
from tests import forkserver
from tests.pgserver import PgServer, free_port
from tests.timing import SLACK

__all__ = ["free_port"]  # re-exported: the one free-port finder (tests/pgserver.py)

ROOT = Path(__file__).resolve().parent.parent


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def require(tool: str, package: str | None = None) -> str:
    """The path of a program the tests need (beanstalkd, tmux, chromium, …).

    Missing, the test FAILS with the package to install: a suite that skips what it
    cannot run would report a green run that checked nothing. ``make test`` installs
    them (``.ci/install-test-deps``)."""
    path = shutil.which(tool)
    if path is None:
        pytest.fail(f"{tool} is not installed: apt-get install {package or tool} "
                    "(or run .ci/install-test-deps as root)", pytrace=False)
    return path


def wait_listening(port: int, proc: subprocess.Popen[bytes] | None = None,
                   timeout: float = 10 * SLACK) -> bool:
    """Wait until something accepts connections on 127.0.0.1:port; False if ``proc``
    exited first or the time ran out. The one start-and-wait loop of the suite."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and (proc is None or proc.poll() is None):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return True
        except OSError:
            time.sleep(0.02)
    return False


class BeanstalkdProcess:
    """``sqlq-beanstalkd`` (or, with ``serve``, ``sqlq serve``) on a free loopback port,
    in its own process, over ``directory/sqlq.db`` or, with ``location``, over that file
    or PostgreSQL URL."""

    def __init__(self, directory: Path | None, *flags: str, serve: bool = False,
                 location: str | None = None) -> None:
        if location is None:
            assert directory is not None
            location = str(directory / "sqlq.db")
        self.db = Path(location) if "://" not in location else None
        for _ in range(5):
            self.port = free_port()
            if serve:
                args = ["-m", "sqlq", "--db", location, "serve", "--listen",
                        f"127.0.0.1:{self.port}", *flags]
            else:
                backing = str(directory) if directory is not None else location
                args = ["-m", "sqlq.server", "-l", "127.0.0.1", "-p", str(self.port),
                        "-b", backing, *flags]
            self.proc = forkserver.Popen([sys.executable, *args], cwd=ROOT,
                                         stderr=subprocess.PIPE)
            if wait_listening(self.port, self.proc):  # type: ignore[arg-type]
                return
            self.stop()
        raise RuntimeError("sqlq-beanstalkd did not start")

    @property
    def address(self) -> tuple[str, int]:
        return ("127.0.0.1", self.port)

    def connect(self, timeout: float = 5.0) -> socket.socket:
        return socket.create_connection(self.address, timeout=timeout)

    def alive(self) -> bool:
        return self.proc.poll() is None

    def stop(self) -> None:
        terminate(self.proc)
        if self.proc.stderr:
            self.proc.stderr.close()


class Running:
    """A Server on 127.0.0.1:<free port>, in a thread of the test process."""

    def __init__(self, path: str, max_job_size: int = 65535,
                 max_buffered: int | None = None, *, durability: str = "normal",
                 vfs: str | None = None) -> None:
        self.path = path
        self.queue = sqlq.Queue(path, durability=durability,  # type: ignore[arg-type]
                                max_job_size=max_job_size, vfs=vfs)
        self.server = Server(self.queue, max_job_size=max_job_size, max_buffered=max_buffered)
        host, port = self.server.listen("127.0.0.1:0").rsplit(":", 1)
        self.address = (host, int(port))
        self.thread = threading.Thread(target=self.server.run, daemon=True)
        self.thread.start()

    def stop(self) -> None:
        self.server.stop()
        self.thread.join(10)
        self.queue.close()


class Raw:
    """A client that speaks bytes, to check every reply byte for byte."""

    def __init__(self, address: tuple[str, int]) -> None:
        self.sock = socket.create_connection(address, timeout=10)
        self.buf = b""

    def send(self, data: bytes) -> None:
        self.sock.sendall(data)

    def line(self) -> bytes:
        while b"\r\n" not in self.buf:
            data = self.sock.recv(65536)
            if not data:
                raise EOFError(self.buf)
            self.buf += data
        line, _, self.buf = self.buf.partition(b"\r\n")
        return line + b"\r\n"

    def exactly(self, n: int) -> bytes:
        while len(self.buf) < n:
            data = self.sock.recv(65536)
            if not data:
                raise EOFError(self.buf)
            self.buf += data
        data, self.buf = self.buf[:n], self.buf[n:]
        return data

    def cmd(self, line: bytes) -> bytes:
        """Send one command line; return the reply line and its data chunk if it has one."""
        self.send(line + b"\r\n")
        return self.reply()

    def reply(self) -> bytes:
        head = self.line()
        word, *args = head.split()
        if word in (b"OK", b"FOUND", b"RESERVED"):
            return head + self.exactly(int(args[-1]) + 2)
        return head

    def closed_by_server(self) -> bool:
        self.sock.settimeout(2)
        return self.sock.recv(1) == b""

    def close(self) -> None:
        self.sock.close()


@contextmanager
def beanstalkd(*flags: str) -> Iterator[tuple[str, int]]:
    """The real beanstalkd (Debian's) on a free loopback port: the reference that
    sqlq-beanstalkd's replies are compared with."""
    program = require("beanstalkd")
    port = free_port()
    proc = subprocess.Popen([program, "-l", "127.0.0.1", "-p", str(port), *flags],
                            stderr=subprocess.DEVNULL)
    try:
        if not wait_listening(port, proc):  # type: ignore[arg-type]
            pytest.fail(f"beanstalkd did not start (exit status {proc.poll()})", pytrace=False)
        yield ("127.0.0.1", port)
    finally:
        proc.terminate()
        proc.wait()


def terminate(proc: subprocess.Popen[Any]) -> None:
    """Stop a server's process: SIGTERM, then SIGKILL if it has not ended in 10 s."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


_R = TypeVar("_R")


def on_both(tmp_path: Path, play: Callable[[tuple[str, int]], _R]) -> tuple[_R, _R]:
    """``play`` against a fresh beanstalkd, then a fresh sqlq server: (ours, theirs)."""
    with beanstalkd() as fresh:
        theirs = play(fresh)
    running = Running(str(tmp_path / "compared.db"))
    try:
        ours = play(running.address)
    finally:
        running.stop()
    return ours, theirs


#: Waits for EOF on stdin (the test process died or closed the pipe), then stops the
#: PgBouncer of the pid file and removes its directory (PgServer's reaper, for a pooler).
_BOUNCER_REAPER = """
import os, shutil, signal, sys, time
root, pidfile = sys.argv[1:]
sys.stdin.buffer.read()
try:
    os.kill(int(open(pidfile).read()), signal.SIGTERM)
    time.sleep(0.5)
except (OSError, ValueError):
    pass
shutil.rmtree(root, ignore_errors=True)
"""


class PgBouncer:
    """Debian's PgBouncer in front of a test PostgreSQL server (``tests/pgserver.py``), on
    a free loopback port, in ``transaction``, ``session`` or ``statement`` pool mode,
    every database of the server behind it, trust auth as the server's.

    As root it runs as ``postgres`` (PgBouncer refuses root). A reaper process stops it
    if the test process dies without :meth:`close`, as PgServer's does the server.

    Example:
        with PgBouncer(pg_server, "transaction") as bouncer:
            url = bouncer.through(pg_url)   # the same database, through the pooler
    """

    def __init__(self, server: PgServer, mode: str = "transaction", *,
                 pool_size: int = 20) -> None:
        if mode not in ("session", "transaction", "statement"):
            raise ValueError(f"not a pool mode: {mode!r}")
        self.server, self.mode, self.pool_size = server, mode, pool_size
        self.port = 0
        self.root: Path | None = None
        self.proc: subprocess.Popen[bytes] | None = None
        self._reaper: subprocess.Popen[bytes] | None = None

    def through(self, url: str) -> str:
        """``url`` (a database of the server) with this pooler's port instead."""
        return url.replace(f"127.0.0.1:{self.server.port}/", f"127.0.0.1:{self.port}/", 1)

    def start(self) -> PgBouncer:
        # Debian puts it in /usr/sbin, off a non-root user's PATH
        program = shutil.which("pgbouncer") or ("/usr/sbin/pgbouncer" if os.access(
            "/usr/sbin/pgbouncer", os.X_OK) else require("pgbouncer"))
        if self.root is None:
            self.root = Path(tempfile.mkdtemp(prefix="sqlq-pgbouncer-"))
            self._reaper = subprocess.Popen(
                [sys.executable, "-c", _BOUNCER_REAPER, str(self.root),
                 str(self.root / "pgbouncer.pid")],
                stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                start_new_session=True)
        as_root = os.geteuid() == 0
        if as_root:
            shutil.chown(self.root, "postgres", "postgres")
        for _ in range(5):
            self.port = self.port or free_port()
            (self.root / "users.txt").write_text('"postgres" ""\n')
            (self.root / "pgbouncer.ini").write_text(
                "[databases]\n"
                f"* = host=127.0.0.1 port={self.server.port}\n"
                "[pgbouncer]\n"
                f"listen_addr = 127.0.0.1\nlisten_port = {self.port}\nunix_socket_dir =\n"
                f"auth_type = trust\nauth_file = {self.root}/users.txt\n"
                # Roles a test makes later (not in auth_file) are looked up as postgres.
                "auth_user = postgres\n"
                f"pool_mode = {self.mode}\ndefault_pool_size = {self.pool_size}\n"
                "max_client_conn = 1000\nserver_login_retry = 1\n"
                f"logfile = {self.root}/pgbouncer.log\npidfile = {self.root}/pgbouncer.pid\n"
                "ignore_startup_parameters = extra_float_digits\n")
            self.proc = subprocess.Popen(
                [program, *(["-u", "postgres"] if as_root else []),
                 str(self.root / "pgbouncer.ini")],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            if wait_listening(self.port, self.proc):  # type: ignore[arg-type]
                return self
            self.proc.wait()
            self.port = 0  # taken meanwhile: another port
        pytest.fail(f"pgbouncer did not start: {self.log_tail()}", pytrace=False)

    def stop(self) -> None:
        """Stop the pooler (its clients' connections end); :meth:`start` brings it back on
        the same port."""
        if self.proc is not None:
            terminate(self.proc)
        self.proc = None

    def close(self) -> None:
        self.stop()
        if self._reaper is not None:
            assert self._reaper.stdin is not None
            self._reaper.stdin.close()  # it finds nothing running, removes the directory
            self._reaper.wait(10)
            self._reaper = None
        self.root = None

    def log_tail(self, lines: int = 20) -> str:
        try:
            assert self.root is not None
            return "\n".join((self.root / "pgbouncer.log").read_text().splitlines()[-lines:])
        except (OSError, AssertionError):
            return ""

    def __enter__(self) -> PgBouncer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()
