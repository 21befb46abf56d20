"""Row 4 / 4pg (put from 8 threads sharing a Queue against 1 thread) from two checkouts,
turn and turn about.

    .venv/bin/python bench/bench_threads_ab.py --a /work/main [--b .] [--jobs 3000]
        [--rounds 5] [--threads 1,8] [--backends sqlite,postgres]

A change to group commit is measured against the code before it in the same run: in
each round every thread count runs once per checkout (A first on even rounds, B first
on odd ones), each in a child process of its own importing that checkout's ``sqlq``, on
a fresh file (SQLite, full durability) or a fresh database (PostgreSQL, a throwaway
server with fsync on). The workload is bench/targets.py's ``_threads_put`` itself.
Besides the rates, the child's CPU per put (user + system, every thread, the Queue's
open and its threads' start included) and its context switches per put (voluntary +
forced, getrusage) are reported: on a machine shared with other benchmarks the disk's
fsync rate swings, these much less. Each line: medians over the rounds, then the
median of the B/A ratios taken in the same round, with its min-max.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

HERE = Path(__file__).resolve().parent

CHILD = r"""
import json, resource, sys, time
sys.path.insert(0, sys.argv[1])
sys.path.insert(1, sys.argv[2])
import targets
loc, n, k = sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
c0, r0 = time.process_time(), resource.getrusage(resource.RUSAGE_SELF)
rate = targets._threads_put(loc, None if "://" in loc else "full", n, k)
r1 = resource.getrusage(resource.RUSAGE_SELF)
print(json.dumps({"rate": rate, "cpu_us": (time.process_time() - c0) / n * 1e6,
                  "vcs": (r1.ru_nvcsw - r0.ru_nvcsw) / n,
                  "ivcs": (r1.ru_nivcsw - r0.ru_nivcsw) / n}))
"""


def run(checkout: Path, loc: str, n: int, k: int) -> dict[str, float]:
    out = subprocess.run([sys.executable, "-c", CHILD, str(checkout), str(HERE), loc, str(n),
                          str(k)], check=True, capture_output=True, text=True).stdout
    result: dict[str, float] = json.loads(out.splitlines()[-1])
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--a", type=Path, required=True)
    parser.add_argument("--b", type=Path, default=HERE.parent)
    parser.add_argument("--jobs", type=int, default=3000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--threads", default="1,8")
    parser.add_argument("--backends", default="sqlite,postgres")
    parser.add_argument("--verbose", action="store_true", help="print every run")
    args = parser.parse_args()
    counts = [int(k) for k in args.threads.split(",")]
    sides = {"A": args.a.resolve(), "B": args.b.resolve()}
    for backend in args.backends.split(","):
        server = None
        if backend == "postgres":
            sys.path.insert(0, str(HERE))
            from bench_batch import pg_locations
            location, server = pg_locations()
        else:
            tmp = Path(tempfile.mkdtemp(prefix="sqlq-bench-threads-ab-"))
            paths = iter(range(1_000_000))

            def location(tmp: Path = tmp, paths: Iterator[int] = paths) -> str:
                return str(tmp / f"q{next(paths)}.db")
        # results[side][k] = list of per-round dicts
        results: dict[str, dict[int, list[dict[str, float]]]] = {
            s: {k: [] for k in counts} for s in sides}
        try:
            for r in range(args.rounds):
                order = ["A", "B"] if r % 2 == 0 else ["B", "A"]
                for k in counts:
                    for side in order:
                        results[side][k].append(run(sides[side], location(), args.jobs, k))
                        if args.verbose:
                            got = results[side][k][-1]
                            print(f"  round {r} {side} {k} thread(s): {got['rate']:8,.0f}/s "
                                  f"{got['cpu_us']:5.1f} us cpu {got['vcs']:.2f}+"
                                  f"{got['ivcs']:.2f} switches", flush=True)
        finally:
            if server is not None:
                server.close()
        for k in counts:
            line = [f"{backend:8} {k} thread{'s' if k > 1 else ' '}"]
            for side in sides:
                rates = [x["rate"] for x in results[side][k]]
                cpu = [x["cpu_us"] for x in results[side][k]]
                vcs = [x["vcs"] for x in results[side][k]]
                ivcs = [x["ivcs"] for x in results[side][k]]
                line.append(f"{side} {statistics.median(rates):8,.0f}/s "
                            f"{statistics.median(cpu):5.1f} us cpu "
                            f"{statistics.median(vcs):.2f}+{statistics.median(ivcs):.2f} sw")
            ratios = [b["rate"] / a["rate"] for a, b in zip(results["A"][k], results["B"][k],
                                                            strict=True)]
            line.append(f"B/A {statistics.median(ratios):.2f}x "
                        f"({min(ratios):.2f}-{max(ratios):.2f})")
            print("  ".join(line), flush=True)
        if len(counts) > 1:
            top, one = counts[-1], counts[0]
            for side in sides:
                per_round = [m["rate"] / o["rate"] for o, m in
                             zip(results[side][one], results[side][top], strict=True)]
                print(f"{backend:8} {side}: {top} vs {one} thread, median "
                      f"{statistics.median(per_round):.2f}x "
                      f"({min(per_round):.2f}-{max(per_round):.2f})", flush=True)


if __name__ == "__main__":
    main()
