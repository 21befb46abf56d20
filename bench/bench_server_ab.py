"""``sqlq-beanstalkd`` from two checkouts and Debian's ``beanstalkd``, turn and turn about.

    .venv/bin/python bench/bench_server_ab.py --a /work/main [--b .] [--jobs 3000]
        [--rounds 3] [--clients 8,1] [--fsync 50,0] [--b-flags "-P 2"]

A change to the server is measured against the code before it in the same run:
for each round, each ``-f`` setting and each client count, the systems (A: the
``--a`` checkout, B: ``--b``, and beanstalkd) start in turn, in the opposite order
on odd rounds, each on a fresh directory, and greenstalk clients put ``--jobs``
jobs, then reserve+delete them (bench_server.py's clients). Besides the rates,
the clients' CPU per job (they share the machine's cores with the server) and
the server's own CPU per job (the scheduler's count, /proc/PID/task/*/schedstat,
before and after each phase) is reported: on a machine shared with other benchmarks the rates swing
with everyone's load and the disk's fsync latency, the CPU a job costs the
server much less. Each line: medians over the rounds, then the median ratio
of the pairs taken in the same round, with its min-max. ``--b-flags`` adds flags
to B's command line (``--a . --b-flags "-P 2"``: two server processes against one,
same code); a server's CPU includes its child processes'.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import greenstalk
from bench_server import free_port, many_clients, wait_listening

PHASES = ("put/s", "drain/s", "cpu us/put", "cpu us/drain", "client cpu us/put",
          "client cpu us/drain")


def cpu_seconds(pid: int) -> float:
    """CPU time of every thread of ``pid`` and of its children (``-P``'s server
    processes) from the scheduler's own ns count (schedstat): /proc's utime and stime
    count 10 ms ticks, a tenth of what 3,000 puts cost."""
    total = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            total += int((task / "schedstat").read_text().split()[0])
        except (OSError, ValueError):
            pass  # a thread that ended meanwhile
    try:
        children = [int(c) for c in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        children = []
    return total / 1e9 + sum(cpu_seconds(c) for c in children)


def start(argv: list[str], env: dict[str, str] | None) -> tuple[subprocess.Popen[bytes], int, str]:
    """A server on a free port over a fresh directory, warmed up by one put and drain."""
    directory = tempfile.mkdtemp(prefix="sqlq-bench-ab-")
    port = free_port()
    proc = subprocess.Popen([*argv, "-l", "127.0.0.1", "-p", str(port), "-b", directory],
                            env=env, cwd=directory, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    wait_listening(port)
    with greenstalk.Client(("127.0.0.1", port)) as c:
        c.put("warm-up")
        c.delete(c.reserve(timeout=5))
    if "-P" in argv:  # every process's file open before the timing starts
        count, seen = int(argv[argv.index("-P") + 1]), set()
        while len(seen) < count:
            with greenstalk.Client(("127.0.0.1", port)) as c:
                seen.add(c.stats()["pid"])
    return proc, port, directory


def one_client(port: int, jobs: int, pid: int) -> tuple[float, float, float, float, float]:
    """(put/s, drain/s, the server's CPU seconds when the puts ended, this client's CPU
    seconds for the puts and for the drain) for one client."""
    body = b"x" * 128
    with greenstalk.Client(("127.0.0.1", port), encoding=None) as c:
        start, own = time.perf_counter(), time.process_time()
        for _ in range(jobs):
            c.put(body)
        put = jobs / (time.perf_counter() - start)
        own_put = time.process_time() - own
        cpu = cpu_seconds(pid)
        start, own = time.perf_counter(), time.process_time()
        for _ in range(jobs):
            c.delete(c.reserve(timeout=5))
        return (put, jobs / (time.perf_counter() - start), cpu, own_put,
                time.process_time() - own)


def children_cpu() -> float:
    """CPU seconds of the waited-for children: the forked clients (the server is
    waited for only once the phases are over)."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def measure(argv: list[str], env: dict[str, str] | None, clients: int, jobs: int
            ) -> tuple[float, ...]:
    """put/s, drain/s, server CPU µs per put and per reserve+delete, and the clients'
    CPU µs per put and per reserve+delete: on a machine the clients share with the
    server, the two CPU figures together bound the rates."""
    proc, port, directory = start(argv, env)
    try:
        cpu0 = cpu_seconds(proc.pid)
        if clients == 1:
            put, drain, cpu1, own_put, own_drain = one_client(port, jobs, proc.pid)
        else:
            own = children_cpu()
            put = many_clients(port, clients, jobs, "put")
            cpu1, own_put = cpu_seconds(proc.pid), children_cpu() - own
            drain = many_clients(port, clients, jobs, "drain")
            own_drain = children_cpu() - own - own_put
        cpu2 = cpu_seconds(proc.pid)
    finally:
        proc.terminate()
        proc.wait(10)
        shutil.rmtree(directory, ignore_errors=True)
    return (put, drain, (cpu1 - cpu0) / jobs * 1e6, (cpu2 - cpu1) / jobs * 1e6,
            own_put / jobs * 1e6, own_drain / jobs * 1e6)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--a", required=True, help="the checkout to compare against")
    parser.add_argument("--b", default=str(Path(__file__).resolve().parent.parent))
    parser.add_argument("--jobs", type=int, default=3000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--clients", default="8,1")
    parser.add_argument("--fsync", default="50,0")
    parser.add_argument("--b-flags", default="", help="more flags for B's server (-P 2)")
    args = parser.parse_args()
    server = [sys.executable, "-m", "sqlq.server"]
    systems: dict[str, tuple[list[str], dict[str, str] | None]] = {
        "A": (server, dict(os.environ, PYTHONPATH=os.path.abspath(args.a))),
        "B": ([*server, *args.b_flags.split()],
              dict(os.environ, PYTHONPATH=os.path.abspath(args.b)))}
    beanstalkd = shutil.which("beanstalkd")
    if beanstalkd:
        systems["beanstalkd"] = ([beanstalkd], None)
    results: dict[tuple[int, int, str], list[tuple[float, ...]]] = {}
    for n in range(args.rounds):
        for fsync in map(int, args.fsync.split(",")):
            for clients in map(int, args.clients.split(",")):
                for name in (list(systems) if n % 2 == 0 else list(systems)[::-1]):
                    argv, env = systems[name]
                    row = measure([*argv, "-f", str(fsync)], env, clients, args.jobs)
                    results.setdefault((fsync, clients, name), []).append(row)
                    print(f"round {n} -f {fsync} {clients}c {name}: " + "  ".join(
                        f"{k} {v:,.0f}" for k, v in zip(PHASES, row, strict=True)), flush=True)
    print()
    for fsync in map(int, args.fsync.split(",")):
        for clients in map(int, args.clients.split(",")):
            for i, phase in enumerate(PHASES):
                cells = {name: [r[i] for r in results[fsync, clients, name]] for name in systems}
                line = f"-f {fsync:<2} {clients}c {phase:13s}" + "".join(
                    f" {name}={statistics.median(v):,.0f}" for name, v in cells.items())
                pairs = [("B", "A")] + [(s, "beanstalkd") for s in "AB" if "beanstalkd" in cells]
                for num, den in pairs:
                    ratios = [x / y for x, y in zip(cells[num], cells[den], strict=True) if y]
                    if ratios:
                        line += (f"  {num}/{den} {statistics.median(ratios):.2f}"
                                 f" ({min(ratios):.2f}-{max(ratios):.2f})")
                print(line)


if __name__ == "__main__":
    main()
