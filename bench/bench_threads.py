"""Puts per second from 1, 2, 4 and 8 threads sharing one Queue (issue 12's group
commit: concurrent writes share one transaction and one commit). Reported, not
asserted (target: 8 threads >= 3x one thread, full durability, SQLite).

    .venv/bin/python bench/bench_threads.py [--seconds 1.5] [--runs 3] [--threads 1,2,4,8]
                                            [--durability full,normal]
                                            [--backends sqlite,postgres]

Each thread calls ``q.put`` in a loop until the time is up; the rate is every put
acknowledged over the time from the start until the last thread stopped. SQLite: a
fresh file in a temporary directory per run. PostgreSQL: a throwaway server started
here (``tests/pgserver.py``) with fsync and synchronous commit on, a fresh database
per run. The thread counts take turns within each run; the median of the runs is
printed with the spread (half the range over the median) and the ratio to one thread.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench_batch import pg_locations  # noqa: E402

import sqlq  # noqa: E402

BODY = b"x" * 128


def measure(url: str, threads: int, seconds: float, durability: str) -> float:
    """One run: puts/s from ``threads`` threads sharing one Queue on ``url``."""
    counts = [0] * threads
    errors: list[BaseException] = []
    with sqlq.Queue(url, durability=durability) as q:  # type: ignore[arg-type]
        q.put(b"warm up")
        start = threading.Barrier(threads + 1)
        end = 0.0

        def putter(i: int) -> None:
            start.wait()
            n = 0
            try:
                while time.perf_counter() < end:
                    q.put(BODY)
                    n += 1
            except BaseException as e:  # noqa: BLE001 - reported below
                errors.append(e)
            counts[i] = n

        pool = [threading.Thread(target=putter, args=(i,)) for i in range(threads)]
        for t in pool:
            t.start()
        began = time.perf_counter()
        end = began + seconds
        start.wait()
        for t in pool:
            t.join()
        took = time.perf_counter() - began
    if errors:
        raise SystemExit(f"a putter failed: {errors[0]!r}")
    return sum(counts) / took


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=1.5)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--threads", default="1,2,4,8")
    parser.add_argument("--durability", default="full,normal")
    parser.add_argument("--backends", default="sqlite,postgres")
    args = parser.parse_args()
    counts = [int(n) for n in args.threads.split(",")]
    for backend in args.backends.split(","):
        server = None
        location: Callable[[], str]
        if backend == "postgres":
            location, server = pg_locations()
        else:
            tmp = Path(tempfile.mkdtemp(prefix="sqlq-bench-threads-"))
            paths = iter(range(1_000_000))

            def location(tmp: Path = tmp, paths: object = paths) -> str:
                return str(tmp / f"q{next(paths)}.db")  # type: ignore[call-overload]
        try:
            for durability in args.durability.split(","):
                # Thread counts interleaved within each run: the machine's drift (a shared
                # disk's fsync rate moves by 2x) falls on every count alike.
                rates: dict[int, list[float]] = {n: [] for n in counts}
                for _ in range(args.runs):
                    for threads in counts:
                        rates[threads].append(
                            measure(location(), threads, args.seconds, durability))
                base = statistics.median(rates[counts[0]])
                for threads in counts:
                    median = statistics.median(rates[threads])
                    spread = (max(rates[threads]) - min(rates[threads])) / 2 / median
                    label = f"{threads} thread{'s' if threads > 1 else ' '}"
                    print(f"{backend:8} {durability:6} {label} {median:9,.0f} puts/s "
                          f"±{spread:4.0%}  {median / base:5.2f}x one thread", flush=True)
        finally:
            if server is not None:
                server.close()


if __name__ == "__main__":
    main()
