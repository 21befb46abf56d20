"""The beanstalkd protocol, end to end: ``sqlq-beanstalkd`` against Debian's ``beanstalkd``.

    .venv/bin/python bench/bench_server.py [--jobs 3000] [--idle 200]

For each server and durability class (full: ``-f 0``, an fsync per write;
normal: sqlq ``-F`` against beanstalkd ``-f 50``), started on a free loopback
port with its files in a fresh directory (``-b``), one greenstalk client does
``--jobs`` puts, then ``--jobs`` reserve+delete pairs. Then ``--idle``
connections are opened and left idle for 5 s: the server's resident memory
before and after, and the CPU it used meanwhile, come from /proc. beanstalkd is
skipped, saying so, where it is not installed (``apt-get install beanstalkd``).
"""

from __future__ import annotations

import argparse
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import greenstalk

BIN = Path(sys.executable).parent
CLK = os.sysconf("SC_CLK_TCK")
PAGE = os.sysconf("SC_PAGE_SIZE")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_listening(port: int, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return
        except OSError:
            time.sleep(0.02)
    raise RuntimeError(f"nothing listens on port {port}")


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK  # utime + stime


def rss_mib(pid: int) -> float:
    return int(Path(f"/proc/{pid}/statm").read_text().split()[1]) * PAGE / 2**20


def measure(name: str, argv: list[str], jobs: int, idle: int) -> dict[str, object]:
    directory = tempfile.mkdtemp(prefix="sqlq-bench-server-")
    port = free_port()
    server = subprocess.Popen([*argv, "-l", "127.0.0.1", "-p", str(port), "-b", directory],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_listening(port)
        body = b"x" * 128
        with greenstalk.Client(("127.0.0.1", port)) as client:
            start = time.perf_counter()
            for _ in range(jobs):
                client.put(body)
            put_rate = jobs / (time.perf_counter() - start)
            start = time.perf_counter()
            for _ in range(jobs):
                client.delete(client.reserve(timeout=5))
            drain_rate = jobs / (time.perf_counter() - start)
        rss_before = rss_mib(server.pid)
        conns = [socket.create_connection(("127.0.0.1", port)) for _ in range(idle)]
        for c in conns[:: max(1, idle // 20)]:  # make sure they were accepted
            c.sendall(b"list-tube-used\r\n")
            c.recv(64)
        cpu0 = cpu_seconds(server.pid)
        time.sleep(5)
        idle_cpu = cpu_seconds(server.pid) - cpu0
        rss_after = rss_mib(server.pid)
        for c in conns:
            c.close()
        return {"system": name, "put/s": put_rate, "reserve+delete/s": drain_rate,
                "RSS MiB": rss_before, f"RSS with {idle} idle": rss_after,
                "idle CPU s/5 s": idle_cpu}
    finally:
        server.terminate()
        server.wait(10)
        shutil.rmtree(directory, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=3000)
    parser.add_argument("--idle", type=int, default=200)
    args = parser.parse_args()
    sqlq_bin = str(BIN / "sqlq-beanstalkd")
    systems = [("sqlq-beanstalkd -f 0 (full)", [sqlq_bin, "-f", "0"]),
               ("sqlq-beanstalkd -F (normal)", [sqlq_bin, "-F"])]
    beanstalkd = shutil.which("beanstalkd")
    if beanstalkd:
        systems += [("beanstalkd -f 0", [beanstalkd, "-f", "0"]),
                    ("beanstalkd -f 50", [beanstalkd, "-f", "50"])]
    else:
        print("beanstalkd is not installed: only sqlq-beanstalkd is measured")
    rows = [measure(name, argv, args.jobs, args.idle) for name, argv in systems]
    keys = list(rows[0])
    widths = [max(len(k), *(len(fmt(r[k])) for r in rows)) for k in keys]
    print("  ".join(k.ljust(w) for k, w in zip(keys, widths, strict=True)))
    for r in rows:
        print("  ".join(fmt(r[k]).ljust(w) for k, w in zip(keys, widths, strict=True)))


def fmt(value: object) -> str:
    if isinstance(value, float):
        return f"{value:,.0f}" if value >= 100 else f"{value:.3f}" if value < 1 else f"{value:.1f}"
    return str(value)


if __name__ == "__main__":
    main()
