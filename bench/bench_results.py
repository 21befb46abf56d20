"""Result wake latency and transactional enqueue throughput, standalone.

    .venv/bin/python bench/bench_results.py [--jobs 300] [--puts 500] [--durability full]

Two measurements, in a fresh directory under /tmp:

1. ``q.result`` wake latency across processes. A driver puts a job and blocks in
   ``q.result``; a worker process reserves it, waits 2 ms (so the driver is surely
   asleep on the notifier), completes it and notes the time ``complete`` returned.
   Latency = the moment ``result`` returned in the driver minus that time (both
   CLOCK_MONOTONIC, which is system-wide on Linux). Also shown: from the moment
   ``complete`` was called (includes the commit's own fsync).
2. Enqueue throughput, one job per transaction: plain ``q.put``; ``q.transaction()``
   with an application INSERT and ``tx.put``; a stdlib ``sqlite3`` connection with
   an application INSERT, ``sqlq.put(conn, ...)`` and ``conn.commit()``.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import sqlq  # noqa: E402

WORKER = """
import sys, time, sqlq
q = sqlq.Queue(sys.argv[1], durability=sys.argv[2])
times = []
while True:
    job = q.reserve("bench", timeout=30)
    if job is None or job.body == b"stop":
        break
    time.sleep(0.002)
    before = time.monotonic()
    job.complete(b"done")
    times.append((before, time.monotonic()))
q.close()
print("\\n".join(f"{a} {b}" for a, b in times))
"""


def pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(p / 100 * len(ordered)))]


def result_latency(path: str, jobs: int, durability: str) -> tuple[list[float], list[float]]:
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parent.parent))
    worker = subprocess.Popen([sys.executable, "-c", WORKER, path, durability],
                              stdout=subprocess.PIPE, text=True, env=env)
    got: list[float] = []
    with sqlq.Queue(path, durability=durability) as q:
        for i in range(jobs):
            jid = q.put(str(i), tube="bench")
            q.result(jid, timeout=30)
            got.append(time.monotonic())
        q.put(b"stop", tube="bench")
    out, _ = worker.communicate(timeout=60)
    sent = [tuple(map(float, line.split())) for line in out.split("\n") if line]
    from_return = [(g - s[1]) * 1000 for g, s in zip(got, sent, strict=True)]
    from_call = [(g - s[0]) * 1000 for g, s in zip(got, sent, strict=True)]
    return from_return, from_call


def enqueue_rates(path: str, puts: int, durability: str) -> dict[str, float]:
    rates: dict[str, float] = {}
    with sqlq.Queue(path, durability=durability) as q:
        with q.transaction() as tx:
            tx.execute("CREATE TABLE IF NOT EXISTS orders (id INTEGER PRIMARY KEY, note TEXT)")
        start = time.perf_counter()
        for _ in range(puts):
            q.put(b"plain", tube="rates")
        rates["q.put (own transaction)"] = puts / (time.perf_counter() - start)
        start = time.perf_counter()
        for _ in range(puts):
            with q.transaction() as tx:
                tx.execute("INSERT INTO orders (note) VALUES (?)", ("apsw",))
                tx.put(b"tx", tube="rates")
        rates["q.transaction(): INSERT + tx.put"] = puts / (time.perf_counter() - start)
    conn = sqlite3.connect(path)
    conn.execute(f"PRAGMA synchronous = {'FULL' if durability == 'full' else 'NORMAL'}")
    start = time.perf_counter()
    for _ in range(puts):
        conn.execute("INSERT INTO orders (note) VALUES (?)", ("sqlite3",))
        sqlq.put(conn, b"stdlib", tube="rates")
        conn.commit()
    rates["sqlite3: INSERT + sqlq.put + commit"] = puts / (time.perf_counter() - start)
    conn.close()
    return rates


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=300, help="result round trips")
    parser.add_argument("--puts", type=int, default=500, help="transactions per enqueue mode")
    parser.add_argument("--durability", choices=("full", "normal"), default="full")
    args = parser.parse_args()
    workdir = tempfile.mkdtemp(prefix="sqlq-bench-results-")
    try:
        path = os.path.join(workdir, "bench.db")
        print(f"sqlq {sqlq.__version__}, durability={args.durability}, {workdir} "
              f"(SQLite {sqlite3.sqlite_version} in sqlite3)")
        from_return, from_call = result_latency(path, args.jobs, args.durability)
        for label, values in (("after complete() returned", from_return),
                              ("after complete() was called", from_call)):
            print(f"q.result wake latency {label}: p50 {pct(values, 50):.3f} ms, "
                  f"p99 {pct(values, 99):.3f} ms, mean {statistics.fmean(values):.3f} ms "
                  f"({len(values)} results)")
        for label, rate in enqueue_rates(path, args.puts, args.durability).items():
            print(f"enqueue, one job per transaction, {label:38s} {rate:9,.0f} tx/s")
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
