"""Servers for the tests: ``sqlq-beanstalkd`` in its own process, free ports, memory."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


class BeanstalkdProcess:
    """``sqlq-beanstalkd`` (or, with ``serve``, ``sqlq serve``) on a free loopback port,
    in its own process, with its file ``directory/sqlq.db``."""

    def __init__(self, directory: Path, *flags: str, serve: bool = False) -> None:
        self.db = directory / "sqlq.db"
        for _ in range(5):
            self.port = free_port()
            if serve:
                args = ["-m", "sqlq", "--db", str(self.db), "serve", "--listen",
                        f"127.0.0.1:{self.port}", *flags]
            else:
                args = ["-m", "sqlq.server", "-l", "127.0.0.1", "-p", str(self.port),
                        "-b", str(directory), *flags]
            self.proc = subprocess.Popen([sys.executable, *args], cwd=ROOT,
                                         stderr=subprocess.PIPE)
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline and self.proc.poll() is None:
                try:
                    socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                    return
                except OSError:
                    time.sleep(0.02)
            self.stop()
        raise RuntimeError("sqlq-beanstalkd did not start")

    def connect(self, timeout: float = 5.0) -> socket.socket:
        return socket.create_connection(("127.0.0.1", self.port), timeout=timeout)

    def alive(self) -> bool:
        return self.proc.poll() is None

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self.proc.stderr:
            self.proc.stderr.close()
