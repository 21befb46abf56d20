"""AsyncQueue's put and reserve+delete from two checkouts, turn and turn about.

    .venv/bin/python bench/bench_async_ab.py --a /path/to/before [--b .] [--jobs 3000]
        [--rounds 5]

A change to the async face (``asyncq.py``, ``asyncwait.py``) is measured against the
code before it in the same run: each round runs each checkout once (A first on even
rounds), in a child process importing that checkout's ``sqlq``, on a fresh file in
``normal`` durability (the fsync rate of a shared machine swings; the Python path is
what such a change moves). ``--jobs`` awaited puts, then as many reserves (timeout 0)
each followed by ``await job.delete()``. Reported: the medians of the process's CPU
time per job (every thread: the loop's and the AsyncQueue's) and of the rates, and
their ratio B/A.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys

CHILD = r'''
import asyncio, json, os, resource, sys, tempfile, time
import sqlq

N = int(sys.argv[1])


def cpu(a, b):
    return (b.ru_utime + b.ru_stime - a.ru_utime - a.ru_stime) / N * 1e6


async def main():
    path = os.path.join(tempfile.mkdtemp(), "q.db")
    async with sqlq.AsyncQueue(path, durability="normal") as aq:
        await aq.put(b"warm")
        job = await aq.reserve(timeout=0)
        await job.delete()
        r0, t0 = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
        for _ in range(N):
            await aq.put(b"x" * 100, tube="t")
        r1, t1 = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
        for _ in range(N):
            job = await aq.reserve("t", timeout=0)
            await job.delete()
        r2, t2 = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
    print(json.dumps({"put CPU us/job": cpu(r0, r1), "drain CPU us/job": cpu(r1, r2),
                      "put jobs/s": N / (t1 - t0), "drain jobs/s": N / (t2 - t1)}))


asyncio.run(main())
'''


def run(tree: str, jobs: int) -> dict[str, float]:
    out = subprocess.run([sys.executable, "-c", CHILD, str(jobs)], cwd="/tmp", check=True,
                         env={**os.environ, "PYTHONPATH": os.path.abspath(tree)},
                         capture_output=True, text=True).stdout
    return dict(json.loads(out))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--a", required=True, help="the checkout before the change")
    p.add_argument("--b", default=".", help="the checkout with the change (default: here)")
    p.add_argument("--jobs", type=int, default=3000)
    p.add_argument("--rounds", type=int, default=5)
    args = p.parse_args()
    results: dict[str, list[dict[str, float]]] = {args.a: [], args.b: []}
    for n in range(args.rounds):
        for tree in (args.a, args.b) if n % 2 == 0 else (args.b, args.a):
            results[tree].append(run(tree, args.jobs))
    for key in results[args.a][0]:
        a = statistics.median(r[key] for r in results[args.a])
        b = statistics.median(r[key] for r in results[args.b])
        print(f"{key:18s} A={a:10,.1f}  B={b:10,.1f}  B/A={b / a:.2f}")


if __name__ == "__main__":
    main()
