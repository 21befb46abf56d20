"""What a durable step and a cursor save cost (issue 40), on both backends.

    .venv/bin/python bench/bench_steps.py [--saves 2000] [--steps 500]

One job reserved, then ``job.save_cursor("row", n)`` ``--saves`` times (each one small
commit: the lease checked, one row of sqlq_steps written), then ``job.step(name, fn)``
``--steps`` times under new names (a row inserted and the job's count raised), each
timed on its own; per operation: the median and the 99th percentile (µs). On a SQLite
file in both durabilities, and on a PostgreSQL server of its own (``tests/pgserver.py``)
with fsync and synchronous commit on. A plain ``q.put`` (one commit of the same
durability) is beside them for scale. The instructions of a save are
``bench/bench_callgrind.py --workloads cursor``'s.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import sqlq  # noqa: E402


def timed(n: int, op: Callable[[int], object]) -> tuple[float, float]:
    """(median, p99) of ``op(i)`` for i < n, in µs."""
    times = []
    for i in range(n):
        start = time.perf_counter()
        op(i)
        times.append((time.perf_counter() - start) * 1e6)
    times.sort()
    return times[len(times) // 2], times[min(len(times) - 1, int(0.99 * len(times)))]


def measure(location: str, saves: int, steps: int,
            **options: str) -> dict[str, tuple[float, float]]:
    with sqlq.Queue(location, **options) as q:  # type: ignore[arg-type]
        q.put(b"job", ttr=3600)
        job = q.reserve(timeout=0)
        assert job is not None
        job.save_cursor("row", 0)  # the row exists: each save replaces it
        out = {"save_cursor": timed(saves, lambda i: job.save_cursor("row", i)),
               "step (new)": timed(steps, lambda i: job.step(f"s{i}", int, i)),
               "step (recorded)": timed(steps, lambda i: job.step(f"s{i}", int, i)),
               "q.put": timed(saves, lambda i: q.put(b"x", tube="other"))}
        job.delete()
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--saves", type=int, default=2000)
    parser.add_argument("--steps", type=int, default=500)
    args = parser.parse_args()
    results: dict[str, dict[str, tuple[float, float]]] = {}
    workdir = tempfile.mkdtemp(prefix="sqlq-bench-steps-")
    try:
        for durability in ("full", "normal"):
            results[f"sqlite {durability}"] = measure(str(Path(workdir) / f"{durability}.db"),
                                                      args.saves, args.steps,
                                                      durability=durability)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    from pg_peers import _pgserver

    server = _pgserver().PgServer(durable=True).start()
    try:
        server.psql("CREATE DATABASE bench")
        results["postgres"] = measure(server.url_for("bench"), args.saves, args.steps)
    finally:
        server.close()
    print(f"sqlq {sqlq.__version__}, python {sys.version.split()[0]}: µs per operation, "
          "median / p99")
    for where, ops in results.items():
        print(f"  {where:14s} " + "  ".join(f"{op} {p50:.0f} / {p99:.0f}"
                                            for op, (p50, p99) in ops.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
