"""The library's batch API against one job at a time: a bare loop that drains N jobs with
``reserve_many(B)`` + ``delete_many`` (and with ``reserve_many(B, delete=jobs)``, the
worker's fast path) against ``reserve(delete=job)``, one commit per job. Reported, not
asserted (issue 12's target: batches >= 5x one at a time).

    .venv/bin/python bench/bench_batch.py [--jobs 20000] [--batch 10] [--runs 3]
                                          [--durability normal] [--backends sqlite,postgres]

SQLite: a fresh file in a temporary directory per run. PostgreSQL: a throwaway server
started here (``tests/pgserver.py``) with fsync and synchronous commit on, as the
peers' bench rows run; a fresh database per run. The jobs are put before the clock
starts; the median of the runs is printed with the spread (half the range over the
median).
"""

from __future__ import annotations

import argparse
import importlib.util
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import sqlq  # noqa: E402

sys.path.insert(0, str(ROOT / "bench"))
from loops import LOOPS, Loop  # noqa: E402


def measure(location: Callable[[], str], loop: Loop,
            jobs: int, batch: int, durability: str) -> float:
    url = location()
    with sqlq.Queue(url, durability=durability) as q:  # type: ignore[arg-type]
        for start in range(0, jobs, 5000):
            q.put_many([b"job %d" % i for i in range(start, min(start + 5000, jobs))])
        began = time.perf_counter()
        done = loop(q, jobs, batch)
        took = time.perf_counter() - began
    if done != jobs:
        raise SystemExit(f"drained {done} of {jobs} jobs")
    return jobs / took


def pg_locations() -> tuple[Callable[[], str], Any]:
    spec = importlib.util.spec_from_file_location("sqlq_tests_pgserver",
                                                  ROOT / "tests" / "pgserver.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules["sqlq_tests_pgserver"] = mod
    spec.loader.exec_module(mod)
    server = mod.PgServer(durable=True).start()
    count = 0

    def fresh() -> str:
        nonlocal count
        count += 1
        name = f"batch{count}"
        server.psql(f"CREATE DATABASE {name}", "postgres")
        return str(server.url_for(name))

    return fresh, server


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=20_000)
    parser.add_argument("--batch", type=int, default=10)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--durability", default="normal", choices=("normal", "full"))
    parser.add_argument("--backends", default="sqlite,postgres")
    args = parser.parse_args()
    for backend in args.backends.split(","):
        server = None
        if backend == "postgres":
            location, server = pg_locations()
        else:
            tmp = Path(tempfile.mkdtemp(prefix="sqlq-bench-batch-"))
            paths = iter(range(1_000_000))

            def location(tmp: Path = tmp, paths: Any = paths) -> str:
                return str(tmp / f"q{next(paths)}.db")
        try:
            base = None
            for name, loop in LOOPS.items():
                rates = [measure(location, loop, args.jobs, args.batch, args.durability)
                         for _ in range(args.runs)]
                median = statistics.median(rates)
                spread = (max(rates) - min(rates)) / 2 / median
                base = median if base is None else base
                print(f"{backend:8} {args.durability:6} {name:28} {median:9,.0f} jobs/s "
                      f"±{spread:4.0%}  {median / base:5.2f}x one at a time", flush=True)
        finally:
            if server is not None:
                server.close()


if __name__ == "__main__":
    main()
