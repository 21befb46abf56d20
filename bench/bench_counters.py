"""What /metrics' persistent counters cost the hot path, and what histograms would cost.

    .venv/bin/python bench/bench_counters.py [--jobs 20000] [--runs 7]

Three builds of the same file, interleaved run by run (durability normal, where a
per-statement cost shows most): without migration 0005's trigger (as before it),
with it (as shipped), and with it plus a trigger that would keep a histogram of the
wait before reserve (one upsert per claim; rejected, see docs/dashboard.md,
"Cost"). Each run times N single puts, then N reserve+delete (``reserve(delete=)``).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import sqlq  # noqa: E402

HISTOGRAM = """
CREATE TABLE bench_wait (tube TEXT, le INTEGER, n INTEGER NOT NULL DEFAULT 0,
                         PRIMARY KEY (tube, le)) WITHOUT ROWID;
CREATE TRIGGER bench_wait_count AFTER UPDATE OF reserves ON sqlq_jobs
WHEN new.reserves > old.reserves
BEGIN
  INSERT INTO bench_wait (tube, le, n) VALUES (new.tube,
    CASE WHEN new.reserved_until - new.ttr - new.created_at <= 10 THEN 10
         WHEN new.reserved_until - new.ttr - new.created_at <= 100 THEN 100
         WHEN new.reserved_until - new.ttr - new.created_at <= 1000 THEN 1000
         WHEN new.reserved_until - new.ttr - new.created_at <= 10000 THEN 10000
         ELSE -1 END, 1)
  ON CONFLICT (tube, le) DO UPDATE SET n = n + 1;
END;
"""
BUILDS = ("without 0005 trigger", "with 0005 trigger", "with a wait histogram too")


def run(build: str, n: int) -> tuple[float, float]:
    q = sqlq.Queue(Path(tempfile.mkdtemp()) / "q.db", durability="normal")
    if build == BUILDS[0]:
        q._db.write(lambda c: c.execute("DROP TRIGGER sqlq_count_events"))
    elif build == BUILDS[2]:
        q._db.write(lambda c: c.execute(HISTOGRAM))
    t = time.perf_counter()
    for i in range(n):
        q.put(b"job %d" % i)
    put = (time.perf_counter() - t) / n * 1e6
    t = time.perf_counter()
    job = q.reserve(timeout=0)
    while job is not None:
        job = q.reserve(timeout=0, delete=job)
    cycle = (time.perf_counter() - t) / n * 1e6
    q.close()
    return put, cycle


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--jobs", type=int, default=20_000)
    p.add_argument("--runs", type=int, default=7)
    args = p.parse_args()
    results: dict[str, list[tuple[float, float]]] = {b: [] for b in BUILDS}
    for _ in range(args.runs):
        for build in BUILDS:
            results[build].append(run(build, args.jobs))
    print(f"| build | put µs | reserve+delete µs |  (median of {args.runs} x {args.jobs:,})")
    print("|---|---:|---:|")
    for build, samples in results.items():
        print(f"| {build} | {statistics.median(s[0] for s in samples):.1f} "
              f"| {statistics.median(s[1] for s in samples):.1f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
