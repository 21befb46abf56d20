"""The peers' adapters: beanstalkd (via greenstalk), huey, persist-queue, litequeue, honker.

Same interface as systems.py (``System`` / ``Client``); each peer library is
imported inside its adapter, so a missing peer only removes that peer.
"""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from pathlib import Path

from systems import (
    TUBE,
    Client,
    NotSupported,
    System,
    _dist_version,
    _files_bytes,
    _sqlite_files,
    sqlq_missing,
)

# --------------------------------------------------------------------- beanstalkd


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class BeanstalkdClient(Client):
    def __init__(self, port: int) -> None:
        import greenstalk

        self.gs = greenstalk
        self.c = greenstalk.Client(("127.0.0.1", port), encoding=None, use=TUBE, watch=TUBE)

    def put(self, body: bytes) -> None:
        self.c.put(body)

    def put_delayed_many(self, bodies: list[bytes]) -> None:
        raise NotSupported("no batched put in the protocol")

    def take(self, prev: object, timeout: float) -> object | None:
        if prev is not None:
            self.c.delete(prev)  # type: ignore[arg-type]
        try:
            # reserve-with-timeout takes whole seconds
            return self.c.reserve(timeout=int(timeout + 0.999) if timeout > 0 else 0)
        except self.gs.TimedOutError:
            return None

    def finish(self, handle: object) -> None:
        self.c.delete(handle)  # type: ignore[arg-type]

    def body(self, handle: object) -> bytes:
        return handle.body  # type: ignore[attr-defined,no-any-return]

    def close(self) -> None:
        self.c.close()


class Beanstalkd(System):
    family = "beanstalkd"
    wait = "blocking reserve on the socket"

    def __init__(self, mode: str, binary: str | None, why_missing: str = "") -> None:
        self.mode = mode  # "f0", "f50", "mem"
        self.binary = binary
        self.why_missing = why_missing
        self.durability = {"f0": "full", "f50": "normal", "mem": "memory"}[mode]
        self.name = {"f0": "beanstalkd-f0", "f50": "beanstalkd-f50", "mem": "beanstalkd-nobinlog"}[
            mode
        ]
        self.proc: subprocess.Popen[bytes] | None = None

    def unavailable(self) -> str | None:
        if not self.binary:
            return self.why_missing or "beanstalkd binary not found"
        try:
            import greenstalk  # noqa: F401
        except ImportError:
            return "greenstalk is not installed"
        return None

    def version(self) -> str:
        out = subprocess.run([self.binary or "beanstalkd", "-v"], capture_output=True, text=True)
        return f"{out.stdout.strip()} via greenstalk {_dist_version('greenstalk')}"

    def command(self) -> list[str]:
        """The server's argv before its flags."""
        return [str(self.binary)]

    def start(self, workdir: Path) -> None:
        super().start(workdir)
        self.port = free_port()
        cmd = [*self.command(), "-l", "127.0.0.1", "-p", str(self.port)]
        if self.mode != "mem":
            self.binlog = workdir / "binlog"
            self.binlog.mkdir()
            cmd += ["-b", str(self.binlog), "-f", "0" if self.mode == "f0" else "50"]
        self.proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stderr=subprocess.PIPE)
        deadline = time.monotonic() + 5
        while True:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.5).close()
                return
            except OSError:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    err = self.proc.stderr.read().decode() if self.proc.stderr else ""
                    raise RuntimeError(f"beanstalkd did not start: {err.strip()}") from None
                time.sleep(0.01)

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.terminate()
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
            self.proc = None

    def client(self, *, setup: bool = False) -> Client:
        return BeanstalkdClient(self.port)

    def disk_bytes(self) -> int:
        if self.mode == "mem":
            return 0
        return _files_bytes(list(self.binlog.iterdir()))

    def server_pids(self) -> list[int]:
        return [self.proc.pid] if self.proc else []


class SqlqBeanstalkd(Beanstalkd):
    """``sqlq-beanstalkd`` (``python -m sqlq.server``: the checked-out code) with the same
    flags as beanstalkd: ``-f 0`` is durability full, ``-f 50`` normal, ``-b`` a fresh
    directory for its SQLite file; ``processes`` > 1 adds ``-P N`` (N server processes on
    the port, ``-P<N>`` in the name). Off by default: the issue 12 rows (targets.py) use it.
    """

    family = "sqlq-beanstalkd"
    default = False
    mention_off = False

    def __init__(self, mode: str, processes: int = 1) -> None:
        super().__init__(mode, sys.executable)
        self.processes = processes
        self.name = f"sqlq-beanstalkd-{mode}" + (f"-P{processes}" if processes > 1 else "")

    def unavailable(self) -> str | None:
        try:
            import greenstalk  # noqa: F401
        except ImportError:
            return "greenstalk is not installed"
        return sqlq_missing()

    def version(self) -> str:
        out = subprocess.run([*self.command(), "-v"], capture_output=True, text=True)
        return f"{out.stdout.strip()} via greenstalk {_dist_version('greenstalk')}"

    def command(self) -> list[str]:
        many = ["-P", str(self.processes)] if self.processes > 1 else []
        return [sys.executable, "-m", "sqlq.server", *many]

    def start(self, workdir: Path) -> None:
        super().start(workdir)
        # it listens before its file is open: one round trip that needs the file in every
        # process (connections land where the kernel's hash sends them), so that the
        # schema is not timed as the first put
        c = BeanstalkdClient(self.port)
        c.put(b"warm-up")
        c.finish(c.take(None, 5))
        c.close()
        seen: set[str] = set()
        for _ in range(200 if self.processes > 1 else 0):
            c = BeanstalkdClient(self.port)
            seen.add(str(c.c.stats().get("pid")))
            c.close()
            if len(seen) == self.processes:
                break

    def server_pids(self) -> list[int]:
        """The parent and, with ``-P``, its server processes: their CPU is the server's."""
        pids = super().server_pids()
        for pid in list(pids):
            try:
                with open(f"/proc/{pid}/task/{pid}/children") as f:
                    pids += [int(p) for p in f.read().split()]
            except OSError:
                pass
        return pids


# --------------------------------------------------------------------------- huey


class HueyClient(Client):
    """huey's storage layer, the calls its consumer makes (no task pickling).

    A blocked consumer waits as huey's own consumer does at its defaults: poll,
    then sleep 0.1 s growing x1.15 per empty poll up to 10 s, reset on a job.
    """

    INITIAL, BACKOFF, MAX = 0.1, 1.15, 10.0

    def __init__(self, path: Path, durability: str, setup: bool) -> None:
        from huey import SqliteHuey

        self.huey = SqliteHuey(name=TUBE, filename=str(path))
        self.storage = self.huey.storage
        if durability == "normal" or setup:
            self.storage.conn.execute("PRAGMA synchronous=NORMAL")
        self.delay = self.INITIAL

    def put(self, body: bytes) -> None:
        self.storage.enqueue(body)

    def take(self, prev: object, timeout: float) -> object | None:
        data = self.storage.dequeue()  # dequeue deletes: prev needs no ack
        if data is not None or timeout <= 0:
            self.delay = self.INITIAL
            return data
        deadline = time.monotonic() + timeout
        while data is None:
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            time.sleep(min(self.delay, self.MAX, left))
            self.delay = min(self.delay * self.BACKOFF, self.MAX)
            data = self.storage.dequeue()
        self.delay = self.INITIAL
        return data

    def finish(self, handle: object) -> None:
        pass

    def body(self, handle: object) -> bytes:
        return bytes(handle)  # type: ignore[call-overload]

    def close(self) -> None:
        self.storage.close()


class Huey(System):
    family = "huey"
    wait = "huey consumer polling: 0.1 s x1.15 up to 10 s"

    def __init__(self, durability: str) -> None:
        self.durability = durability
        self.name = f"huey-{durability}"

    def unavailable(self) -> str | None:
        try:
            import huey  # noqa: F401
        except ImportError:
            return "huey is not installed"
        return None

    def version(self) -> str:
        import sqlite3

        return f"huey {_dist_version('huey')} SqliteHuey (SQLite {sqlite3.sqlite_version})"

    def start(self, workdir: Path) -> None:
        super().start(workdir)
        self.path = workdir / "huey.db"
        self.client().close()  # create the schema

    def client(self, *, setup: bool = False) -> Client:
        return HueyClient(self.path, self.durability, setup)

    def disk_bytes(self) -> int:
        return _files_bytes(_sqlite_files(self.path))


# ------------------------------------------------------------------ persist-queue

POLL_S = 0.01  # how peers without a cross-process wakeup are polled by a blocked consumer


class PersistQueueClient(Client):
    def __init__(self, directory: Path, durability: str, setup: bool) -> None:
        import persistqueue

        self.empty = persistqueue.Empty
        self.q = persistqueue.SQLiteAckQueue(str(directory), auto_commit=True)
        if durability == "normal" or setup:
            self.q._conn.execute("PRAGMA synchronous=NORMAL")

    def put(self, body: bytes) -> None:
        self.q.put(body)

    def _get(self) -> object | None:
        try:
            return self.q.get(block=False, raw=True)
        except self.empty:
            return None

    def take(self, prev: object, timeout: float) -> object | None:
        if prev is not None:
            self.q.ack(id=prev["pqid"])  # type: ignore[index]
        item = self._get()
        if item is not None or timeout <= 0:
            return item
        # get(block=True) only wakes on a put in the same process and otherwise
        # sleeps TICK_FOR_WAIT (10 s); a cross-process consumer polls instead.
        deadline = time.monotonic() + timeout
        while item is None and time.monotonic() < deadline:
            time.sleep(POLL_S)
            item = self._get()
        return item

    def finish(self, handle: object) -> None:
        self.q.ack(id=handle["pqid"])  # type: ignore[index]

    def body(self, handle: object) -> bytes:
        return handle["data"]  # type: ignore[index,no-any-return]

    def cleanup(self) -> None:
        self.q.clear_acked_data()  # its documented housekeeping, default arguments

    def close(self) -> None:
        self.q.close()


class PersistQueue(System):
    family = "persist-queue"
    wait = f"poll every {POLL_S * 1000:.0f} ms (get(block=True) polls every 10 s)"

    def __init__(self, durability: str) -> None:
        self.durability = durability
        self.name = f"persist-queue-{durability}"

    def unavailable(self) -> str | None:
        try:
            import persistqueue  # noqa: F401
        except ImportError:
            return "persist-queue is not installed"
        return None

    def version(self) -> str:
        import sqlite3

        return (
            f"persist-queue {_dist_version('persist-queue')} SQLiteAckQueue"
            f" (SQLite {sqlite3.sqlite_version})"
        )

    def start(self, workdir: Path) -> None:
        super().start(workdir)
        self.dir = workdir / "pq"
        self.client().close()

    def client(self, *, setup: bool = False) -> Client:
        return PersistQueueClient(self.dir, self.durability, setup)

    def disk_bytes(self) -> int:
        return _files_bytes(_sqlite_files(self.dir / "data.db"))


# ---------------------------------------------------------------------- litequeue


class LitequeueClient(Client):
    def __init__(self, path: Path, durability: str, setup: bool) -> None:
        from litequeue import LiteQueue

        self.q = LiteQueue(str(path))  # sets synchronous=NORMAL itself
        if durability == "full" and not setup:
            self.q.conn.execute("PRAGMA synchronous=FULL")

    def put(self, body: bytes) -> None:
        self.q.put(body.decode("ascii"))  # litequeue stores TEXT

    def take(self, prev: object, timeout: float) -> object | None:
        if prev is not None:
            self.q.done(prev.message_id)  # type: ignore[attr-defined]
        msg = self.q.pop()
        if msg is not None or timeout <= 0:
            return msg
        deadline = time.monotonic() + timeout
        while msg is None and time.monotonic() < deadline:
            time.sleep(POLL_S)
            msg = self.q.pop()
        return msg

    def finish(self, handle: object) -> None:
        self.q.done(handle.message_id)  # type: ignore[attr-defined]

    def body(self, handle: object) -> bytes:
        return handle.data.encode("ascii")  # type: ignore[attr-defined,no-any-return]

    def cleanup(self) -> None:
        self.q.prune()

    def close(self) -> None:
        self.q.close()


class Litequeue(System):
    family = "litequeue"
    wait = f"poll every {POLL_S * 1000:.0f} ms (no blocking get)"

    def __init__(self, durability: str) -> None:
        self.durability = durability
        self.name = f"litequeue-{durability}"

    def unavailable(self) -> str | None:
        try:
            import litequeue  # noqa: F401
        except ImportError:
            return "litequeue is not installed"
        return None

    def version(self) -> str:
        import sqlite3

        return f"litequeue {_dist_version('litequeue')} (SQLite {sqlite3.sqlite_version})"

    def start(self, workdir: Path) -> None:
        super().start(workdir)
        self.path = workdir / "lq.db"
        self.client().close()

    def client(self, *, setup: bool = False) -> Client:
        return LitequeueClient(self.path, self.durability, setup)

    def disk_bytes(self) -> int:
        return _files_bytes(_sqlite_files(self.path))


# ------------------------------------------------------------------------- honker


class Honker(System):
    """Listed so that the table says why it is absent when it does not install.

    honker ships only an sdist on PyPI; building it needs Rust crates from
    crates.io, which an offline machine cannot reach. When it does install, its
    adapter still has to be written against its API (left for that day).
    """

    family = "honker"
    durability = "normal"
    name = "honker"

    def __init__(self, install_note: str) -> None:
        self.install_note = install_note

    def unavailable(self) -> str | None:
        try:
            import honker  # noqa: F401
        except ImportError:
            return self.install_note or "not installed"
        return "installed, but no adapter yet (bench/systems.py: Honker)"
