"""What flow control (sqlq/core/limits.py) costs a worker's loop: one process draining a tube
with ``reserve(delete=job)`` (the worker's one commit per job), the tube

* ``uncapped``: no limits (what every user without limits runs: must not change);
* ``acks``: no limits, ``reserve`` then ``job.delete()``, two commits a job (the delete
  alone, ``delete_leased_job``: PostgreSQL's notifies for a capped job only);
* ``capped``: ``concurrency=1000``, a cap that never binds (the limited claim's cost);
* ``rated``: ``rate=(10**6, 1)``, a rate that never binds (the cost of spending tokens);
* ``empty``: ``reserve(timeout=0)`` on an empty tube without limits (the idle path: a
  plain claim that finds nothing, then, if another connection committed since, one
  read of whether the watched tubes have limits now).

    .venv/bin/python bench/bench_limits.py [--jobs 5000] [--runs 5]
                                           [--backend sqlite|postgres]
                                           [--baseline /path/to/a/checkout]

A fresh SQLite file per run (durability normal), or a fresh database per run on a
throwaway PostgreSQL server started here (``bench_batch.pg_locations``: fsync and
synchronous commit on). ``--baseline`` times the
uncapped, acks, capped and empty rows with another checkout of sqlq (before the change) too, in a
child process, interleaved run by run. Reports the median jobs a second and CPU
microseconds a job, with the spread (half the range over the median).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MODES = ("uncapped", "acks", "capped", "rated", "empty")

ONE_RUN = """
import json, os, sys, tempfile, time
sys.path.insert(0, sys.argv[1])
import sqlq
mode, jobs, url = sys.argv[2], int(sys.argv[3]), sys.argv[4]
location = url or os.path.join(tempfile.mkdtemp(), "bench.db")
q = sqlq.Queue(location, durability="normal")
tube = f"bench-{mode}-{os.getpid()}"
if mode == "capped":
    q.limit(tube, concurrency=1000)
elif mode == "rated":
    q.limit(tube, rate=(10**6, 1))
if mode != "empty":
    q.put_many([b"x" * 64] * jobs, tube=tube)
job = q.reserve(tube, timeout=0)  # warm: statements prepared, limits learnt
if job is not None:
    job.delete()
wall, cpu = time.perf_counter(), time.process_time()
if mode == "empty":
    for _ in range(jobs):
        q.reserve(tube, timeout=0)
elif mode == "acks":
    job = q.reserve(tube, timeout=0)
    while job is not None:
        job.delete()
        job = q.reserve(tube, timeout=0)
else:
    job = q.reserve(tube, timeout=0)
    while job is not None:
        job = q.reserve(tube, timeout=0, delete=job)
wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
if mode in ("capped", "rated"):
    q.limit(tube, concurrency=None, rate=None)
q.close()
print(json.dumps([jobs / wall, cpu / jobs * 1e6]))
"""


def one(root: Path, mode: str, jobs: int, url: str) -> tuple[float, float]:
    out = subprocess.run([sys.executable, "-c", ONE_RUN, str(root), mode, str(jobs), url],
                         check=True, capture_output=True, text=True).stdout
    rate, cpu = json.loads(out.splitlines()[-1])
    return float(rate), float(cpu)


def spread(values: list[float]) -> float:
    median = statistics.median(values)
    return (max(values) - min(values)) / 2 / median * 100 if median else 0.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=5000)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--backend", choices=("sqlite", "postgres"), default="sqlite")
    parser.add_argument("--baseline", type=Path, help="another checkout of sqlq")
    args = parser.parse_args()
    systems = [(f"{mode}", ROOT, mode) for mode in MODES]
    if args.baseline is not None:
        systems += [(f"{mode} @ baseline", args.baseline, mode)
                    for mode in ("uncapped", "acks", "capped", "empty")]
    results: dict[str, list[tuple[float, float]]] = {name: [] for name, _, _ in systems}
    fresh, server = (None, None)
    if args.backend == "postgres":
        from bench_batch import pg_locations  # the same throwaway server bench_batch uses

        fresh, server = pg_locations()
    try:
        for _ in range(args.runs):
            for name, root, mode in systems:  # interleaved: drift hits every row alike
                results[name].append(one(root, mode, args.jobs, fresh() if fresh else ""))
    finally:
        if server is not None:
            server.stop()
    backend = "PostgreSQL" if fresh else "SQLite"
    print(f"{backend}, {args.jobs} jobs, {args.runs} runs, {os.cpu_count()} cores, "
          f"{time.strftime('%Y-%m-%d')}")
    for name, _, _ in systems:
        rates = [r for r, _ in results[name]]
        cpus = [c for _, c in results[name]]
        print(f"{name:22} {statistics.median(rates):9,.0f} claims/s ± {spread(rates):3.0f}%"
              f" | CPU {statistics.median(cpus):6.1f} us/claim ± {spread(cpus):3.0f}%")


if __name__ == "__main__":
    main()
