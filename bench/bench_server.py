"""The beanstalkd protocol, end to end: ``sqlq-beanstalkd`` against Debian's ``beanstalkd``.

    .venv/bin/python bench/bench_server.py [--jobs 3000] [--idle 200] [--clients 8]
        [--pipelined 1000] [--runs 1]

For each server and durability class (full: ``-f 0``, an fsync per write;
normal: sqlq ``-F`` against beanstalkd ``-f 50``), started on a free loopback
port with its files in a fresh directory (``-b``), one greenstalk client does
``--jobs`` puts, then ``--jobs`` reserve+delete pairs. Then ``--clients``
greenstalk clients, one forked process each, released together, do the same
with ``--jobs`` between them (the rate counts from the release to the last
client's end). Then one connection sends ``--pipelined`` puts in one write
and times them until the last reply. Then ``--idle`` connections are opened and
left idle for 5 s: the server's resident memory before and after, and the CPU
it used meanwhile, come from /proc. beanstalkd is skipped, saying so, where it
is not installed (``apt-get install beanstalkd``). With ``--runs N`` the
systems take turns N times (the machine's slow moments are shared) and each
cell is the median, with the spread (half the range over the median) after it.
"""

from __future__ import annotations

import argparse
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

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


def _client_loop(port: int, jobs: int, verb: str, go: Any, done: Any) -> None:
    """One forked client: wait for the release, do ``jobs`` puts or reserve+deletes."""
    body = b"x" * 128
    with greenstalk.Client(("127.0.0.1", port)) as client:
        go.recv()
        if verb == "put":
            for _ in range(jobs):
                client.put(body)
        else:
            for _ in range(jobs):
                client.delete(client.reserve(timeout=5))
        done.send(time.perf_counter())


def many_clients(port: int, clients: int, jobs: int, verb: str) -> float:
    """Jobs per second of ``clients`` processes sharing ``jobs`` puts or reserve+deletes."""
    import multiprocessing

    ctx = multiprocessing.get_context("fork")
    share = jobs // clients
    pipes = [ctx.Pipe() for _ in range(clients)]
    procs = [ctx.Process(target=_client_loop, args=(port, share, verb, child, child))
             for _, child in pipes]
    for p in procs:
        p.start()
    time.sleep(0.3)  # connected and waiting
    start = time.perf_counter()
    for parent, _ in pipes:
        parent.send(1)
    ends = [parent.recv() for parent, _ in pipes]
    for p in procs:
        p.join()
    return share * clients / (max(ends) - start)


def pipelined_puts(port: int, n: int) -> float:
    """Seconds from sending ``n`` puts in one write to reading the last reply."""
    data = b"put 1024 0 60 128\r\n" + b"x" * 128 + b"\r\n"
    with socket.create_connection(("127.0.0.1", port)) as s:
        start = time.perf_counter()
        s.sendall(data * n)
        seen = 0
        while seen < n:
            chunk = s.recv(65536)
            if not chunk:
                raise RuntimeError("the server closed the connection")
            seen += chunk.count(b"\r\n")
        return time.perf_counter() - start


def measure(name: str, argv: list[str], jobs: int, idle: int, clients: int = 8,
            pipelined: int = 1000) -> dict[str, object]:
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
        many_put = many_clients(port, clients, jobs, "put")
        many_drain = many_clients(port, clients, jobs, "drain")
        pipe_s = pipelined_puts(port, pipelined)
        with greenstalk.Client(("127.0.0.1", port)) as client:  # empty it for the idle test
            for _ in range(pipelined):
                client.delete(client.reserve(timeout=5))
        rss_before = rss_mib(server.pid)
        row: dict[str, object] = {
            "system": name, "put/s": put_rate, "reserve+delete/s": drain_rate,
            f"put/s {clients} clients": many_put,
            f"reserve+delete/s {clients} clients": many_drain,
            f"{pipelined} pipelined puts s": pipe_s, "RSS MiB": rss_before}
        if not idle:
            return row
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
        row.update({f"RSS with {idle} idle": rss_after, "idle CPU s/5 s": idle_cpu})
        return row
    finally:
        server.terminate()
        server.wait(10)
        shutil.rmtree(directory, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=3000)
    parser.add_argument("--idle", type=int, default=200)
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--pipelined", type=int, default=1000)
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--systems", default="",
                        help="comma-separated substrings of the system names to run")
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
    if args.systems:
        wanted = args.systems.split(",")
        systems = [(n, a) for n, a in systems if any(w in n for w in wanted)]
    runs: dict[str, list[dict[str, object]]] = {name: [] for name, _ in systems}
    for _ in range(args.runs):
        for name, argv in systems:
            runs[name].append(measure(name, argv, args.jobs, args.idle, args.clients,
                                      args.pipelined))
    rows = [summarize(r) for r in runs.values()]
    keys = list(rows[0])
    widths = [max(len(k), *(len(fmt(r[k])) for r in rows)) for k in keys]
    print("  ".join(k.ljust(w) for k, w in zip(keys, widths, strict=True)))
    for r in rows:
        print("  ".join(fmt(r[k]).ljust(w) for k, w in zip(keys, widths, strict=True)))


def summarize(runs: list[dict[str, object]]) -> dict[str, object]:
    """The median of each measure over the runs, with the spread when there are several."""
    row: dict[str, object] = {}
    for key, first in runs[0].items():
        if not isinstance(first, float):
            row[key] = first
            continue
        values = sorted(float(r[key]) for r in runs)  # type: ignore[arg-type]
        median = statistics.median(values)
        spread = (values[-1] - values[0]) / 2 / median if len(values) > 1 and median else 0.0
        row[key] = fmt(median) + (f" ±{spread:.0%}" if len(values) > 1 else "")
    return row


def fmt(value: object) -> str:
    if isinstance(value, float):
        return f"{value:,.0f}" if value >= 100 else f"{value:.3f}" if value < 1 else f"{value:.1f}"
    return str(value)


if __name__ == "__main__":
    main()
