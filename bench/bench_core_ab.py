"""Issue 12's core rows 2a, 3a and 8a for several checkouts side by side, turn and turn about.

    .venv/bin/python bench/bench_core_ab.py --trees /path/to/baseline . [--runs 5]
        [--rows 2a,3a,8a] [--jobs 5000]

The rows are measured exactly as ``make bench`` measures them (targets.py's sides,
workloads.py's functions), only for other checkouts in the same run:

* ``2a``: ``sqlq work`` no-op jobs, durability full, 4 processes against 1 (``≥ 1×``);
* ``3a``: ``reserve_many(10)`` + ``delete_many`` against ``reserve(delete=job)``,
  durability normal (``≥ 5×``);
* ``8a``: the wake-up p50 of a blocked ``reserve`` (normal) in ms (``≤ 0.5``; p99 too).

Each side runs in a fresh interpreter whose ``sys.path`` and ``PYTHONPATH`` start with
its tree, so the forked children and the ``sqlq work`` processes run that tree's sqlq.
Each run measures every row for every tree, the trees' order alternating from run to
run, so a slow moment of the shared machine hits both trees alike. The table gives, per
tree, the median of the runs' ratios (or p50s) and their range, and the load average.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
ROWS = {"2a": "work 4p / 1p, full", "3a": "reserve_many(10) / one at a time, normal",
        "8a": "wake p50 ms, normal"}


def side(row: str, jobs: int) -> dict[str, float]:
    """One run of a row in this interpreter (its tree's sqlq first on sys.path)."""
    import targets
    import workloads as wl
    from systems import Sqlq

    if row == "2a":
        one = wl.run_sqlq_work(Sqlq("full"), jobs, 1, 0)[0].value
        four = wl.run_sqlq_work(Sqlq("full"), jobs, 4, 0)[0].value
        assert one and four
        return {"1p": one, "4p": four, "ratio": four / one}
    if row == "3a":
        rates = {loop: targets._in_fresh(Sqlq("normal"), targets._lib_drain, "normal",
                                         jobs, loop, 10)
                 for loop in ("reserve(delete=job)", "reserve_many+delete_many")}
        one, many = rates["reserve(delete=job)"], rates["reserve_many+delete_many"]
        return {"one": one, "many": many, "ratio": many / one}
    p50, p99 = wl.run_wake(Sqlq("normal"), 150, 2.5)
    assert p50.value is not None and p99.value is not None
    return {"ratio": p50.value, "p99": p99.value}


def run_side(tree: str, row: str, jobs: int) -> dict[str, float]:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join((tree, str(BENCH))))
    # cwd: ``python -m sqlq`` puts the working directory ahead of PYTHONPATH.
    out = subprocess.run([sys.executable, str(Path(__file__).resolve()), "--child", row,
                          "--tree", tree, "--jobs", str(jobs)], env=env, cwd=tree,
                         capture_output=True, text=True, check=False, timeout=900)
    if out.returncode:
        raise SystemExit(f"{tree} {row} failed:\n{out.stderr}")
    return dict(json.loads(out.stdout.strip().splitlines()[-1]))


def fmt(values: list[float]) -> str:
    return f"{statistics.median(values):.2f} ({min(values):.2f}–{max(values):.2f})"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--trees", nargs="+", default=["."])
    ap.add_argument("--rows", default="2a,3a,8a")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--jobs", type=int, default=5000)
    ap.add_argument("--child", help=argparse.SUPPRESS)
    ap.add_argument("--tree", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child:
        sys.path[:0] = [a.tree, str(BENCH)]
        print(json.dumps(side(a.child, a.jobs)))
        return
    trees = [str(Path(t).resolve()) for t in a.trees]
    rows = a.rows.split(",")
    got: dict[tuple[str, str], list[dict[str, float]]] = {(t, r): [] for t in trees for r in rows}
    loads: list[float] = []
    for run in range(a.runs):
        for tree in trees if run % 2 == 0 else trees[::-1]:
            for row in rows:
                got[tree, row].append(v := run_side(tree, row, a.jobs))
                loads.append(os.getloadavg()[0])
                print(f"run {run + 1} {tree} {row}: "
                      + ", ".join(f"{k} {x:,.2f}" for k, x in v.items()), flush=True)
    print(f"\nmedian (min–max) of {a.runs} runs; load average (1 min) during the runs "
          f"{min(loads):.2f}–{max(loads):.2f}, median {statistics.median(loads):.2f}")
    print("| row | " + " | ".join(trees) + " |")
    print("|---|" + "---:|" * len(trees))
    for row in rows:
        cells: list[Any] = [fmt([v["ratio"] for v in got[t, row]]) for t in trees]
        print(f"| {row} {ROWS[row]} | " + " | ".join(cells) + " |")
        extra = sorted({k for t in trees for v in got[t, row] for k in v} - {"ratio"})
        for k in extra:
            cells = [fmt([v[k] for v in got[t, row]]) for t in trees]
            print(f"|   {k} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
