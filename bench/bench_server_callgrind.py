"""Instructions per job of ``sqlq-beanstalkd`` under 8 greenstalk clients (callgrind).

    .venv/bin/python bench/bench_server_callgrind.py [--trees . /path/to/baseline]
        [--jobs 2000] [--clients 8] [--fsync 50,0]

The server runs under valgrind's callgrind; the clients (bench_server.py's, one
forked process each) put ``--jobs`` jobs, then reserve+delete them, and the
server's counters are dumped (``callgrind_control -d``) before and after each
phase. Printed: the server's user-space instructions per put and per
reserve+delete, for each checkout of ``--trees`` (a checkout before a change
beside the one after). A count, so it holds still on a machine shared with other
work, where the rates and even the CPU per job (bench_server_ab.py) swing by half;
it leaves out the kernel's share (the sockets, the WAL's writes and fsyncs) and
is slowed fifty times, so more commands share a loop round than at full speed.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import greenstalk
from bench_server import free_port, many_clients, wait_listening


def instructions(dump: Path) -> int:
    """The ``totals:`` line of one callgrind dump."""
    for line in dump.read_text().splitlines():
        if line.startswith("totals:"):
            return int(line.split()[1])
    raise RuntimeError(f"{dump}: no totals line")


def measure(tree: str, fsync: int, jobs: int, clients: int) -> dict[str, float]:
    """Instructions per job of the put phase and of the drain phase."""
    directory = tempfile.mkdtemp(prefix="sqlq-bench-cg-")
    out = Path(directory) / "cg.out"
    port = free_port()
    proc = subprocess.Popen(
        ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", sys.executable,
         "-m", "sqlq.server", "-l", "127.0.0.1", "-p", str(port), "-b", directory,
         "-f", str(fsync)],
        env=dict(os.environ, PYTHONPATH=os.path.abspath(tree)), cwd=directory,
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_listening(port, timeout=120)
        with greenstalk.Client(("127.0.0.1", port)) as c:  # the file opened, warm
            c.put("warm-up")
            c.delete(c.reserve(timeout=60))
        result = {}
        for verb in ("put", "drain"):
            subprocess.run(["callgrind_control", "-d", f"before-{verb}", str(proc.pid)],
                           check=True, capture_output=True)
            many_clients(port, clients, jobs, verb)
            subprocess.run(["callgrind_control", "-d", f"after-{verb}", str(proc.pid)],
                           check=True, capture_output=True)
            dumps = sorted(out.parent.glob("cg.out.*"), key=lambda p: int(p.suffix[1:]))
            result[verb] = instructions(dumps[-1]) / (jobs // clients * clients)
        return result
    finally:
        proc.terminate()
        proc.wait(120)
        shutil.rmtree(directory, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trees", nargs="+", default=[str(Path(__file__).parent.parent)])
    parser.add_argument("--jobs", type=int, default=2000)
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--fsync", default="50,0")
    args = parser.parse_args()
    if not shutil.which("valgrind"):
        sys.exit("valgrind is not installed (apt-get install valgrind)")
    for fsync in map(int, args.fsync.split(",")):
        for tree in args.trees:
            r = measure(tree, fsync, args.jobs, args.clients)
            print(f"-f {fsync:<2} {args.clients}c {tree}: {r['put']:,.0f} instructions/put,"
                  f" {r['drain']:,.0f} instructions/reserve+delete", flush=True)


if __name__ == "__main__":
    main()
