"""The PostgreSQL server's CPU per job of a put and of the worker's two loops, from two
checkouts, turn and turn about.

    .venv/bin/python bench/bench_pg_cpu_ab.py --a /path/to/before [--b .] [--jobs 1000]
        [--rounds 7] [--loops put,cycle,fast]

``put``: ``q.put(body)`` one at a time; ``cycle``: ``reserve(timeout=0)`` then
``job.delete()`` (two statements, two commits a job); ``fast``: ``reserve(timeout=0,
delete=prev)`` (the worker's loop, one). Each run is a child process of its own
importing one checkout's ``sqlq``, on a fresh database of one throwaway server
(``tests/pgserver.py``, fsync off: the statements, not the disk): it puts jobs + 1,
drains one (the session's plans are made), then times the rest: the puts of as many
jobs again, or the drain. The figure is the backend's CPU (``/proc/<pid>/schedstat``, the
scheduler's account in ns), so the client's Python and the machine's other load fall
out; the client's own CPU per job is printed beside it. A first on even rounds, B on
odd ones. Each line: medians over the rounds, then the median of the B/A ratios taken
in the same round, with its min-max.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent

CHILD = r"""
import json, sys, time
sys.path.insert(0, sys.argv[1])
import sqlq
url, loop, n = sys.argv[2], sys.argv[3], int(sys.argv[4])
def cpu(pid):
    with open(f"/proc/{pid}/schedstat") as f:
        return int(f.read().split()[0])
with sqlq.Queue(url, durability="normal") as q:
    q.put_many([b"x" * 64] * (n + 1))
    q.reserve(timeout=0).delete()
    pid = q._backend.db._usable().info.backend_pid
    s0, c0 = cpu(pid), time.process_time()
    if loop == "put":
        for _ in range(n):
            q.put(b"x" * 64)
    elif loop == "cycle":
        for _ in range(n):
            q.reserve(timeout=0).delete()
    else:
        job = q.reserve(timeout=0)
        for _ in range(n - 1):
            job = q.reserve(timeout=0, delete=job)
        job.delete()
    server, client = (cpu(pid) - s0) / n / 1000, (time.process_time() - c0) / n * 1e6
    assert loop == "put" or q.reserve(timeout=0) is None
print(json.dumps({"server_us": server, "client_us": client}))
"""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--a", required=True, help="the checkout before")
    parser.add_argument("--b", default=str(HERE.parent), help="the checkout after")
    parser.add_argument("--jobs", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--loops", default="put,cycle,fast")
    args = parser.parse_args()
    sys.path.insert(0, str(HERE.parent / "tests"))
    from pgserver import PgServer

    trees = {"A": str(Path(args.a).resolve()), "B": str(Path(args.b).resolve())}
    loops = args.loops.split(",")
    got: dict[tuple[str, str], list[dict[str, float]]] = {(t, lp): [] for t in trees
                                                          for lp in loops}
    with PgServer() as server:
        for r in range(args.rounds):
            for loop in loops:
                for tree in ("A", "B") if r % 2 == 0 else ("B", "A"):
                    name = f"cpu_{tree.lower()}_{loop}_{r}"
                    url = server.create_database(name)
                    out = subprocess.run([sys.executable, "-c", CHILD, trees[tree], url, loop,
                                          str(args.jobs)], capture_output=True, text=True,
                                         check=True).stdout
                    got[tree, loop].append(json.loads(out.strip().splitlines()[-1]))
                    server.drop_database(name)
    for tree, path in trees.items():
        print(f"{tree}: {path}")
    for loop in loops:
        a, b = got["A", loop], got["B", loop]
        ratios = [y["server_us"] / x["server_us"] for x, y in zip(a, b, strict=True)]
        for tree, runs in (("A", a), ("B", b)):
            print(f"{loop:5s} {tree}  server {statistics.median(r['server_us'] for r in runs):6.1f}"
                  f" us/job  client {statistics.median(r['client_us'] for r in runs):6.1f} us/job")
        print(f"{loop:5s} B/A server {statistics.median(ratios):.3f} "
              f"({min(ratios):.3f}-{max(ratios):.3f}) over {len(ratios)} rounds")
    return 0


if __name__ == "__main__":
    sys.exit(main())
