"""Groups (issue 38): the worker's loop in a tube of 10,000 groups against a tube without
groups, on a file and on PostgreSQL. ``bench/run.py --workloads groups`` runs them
(sqlq-normal, and sqlq-pg when named in ``--systems``); standalone, with no peer and no
RESULTS.md:

    .venv-bench/bin/python bench/groups.py [--jobs 20000] [--groups 10000] [--runs 2]
                                           [--backends sqlite,postgres]

* **no groups N**: N plain jobs (put_many, not timed), drained one at a time by the
  worker's loop (``reserve(delete=prev)``): jobs a second;
* **G groups N**: the same N jobs spread over G groups (``put_many(group=)`` per group,
  not timed), drained by the same loop: every claim takes the groups in turn.

The target: a claim in a tube of 10,000 groups costs at most 1.5 times one in a tube
without groups (the notes give µs per job, and the ratio of the two medians is printed).
Durability normal, so that the rows show the claim, not the disk.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

from workloads import FILL_BATCH, Sample, body, fresh, in_child  # noqa: E402

TUBE = "bench"


def _drain(system: Any, n: int, groups: int) -> dict[str, float]:
    q = system.client(setup=True).q
    try:
        if groups:
            with q.transaction():
                for g in range(groups):
                    count = n // groups + (g < n % groups)
                    q.put_many([body(i) for i in range(count)], tube=TUBE, group=f"g{g}")
        else:
            for lo in range(0, n, FILL_BATCH):
                q.put_many([body(i) for i in range(lo, min(lo + FILL_BATCH, n))], tube=TUBE)
        t0, c0 = time.perf_counter(), time.process_time()
        job, done = None, 0
        while (job := q.reserve([TUBE], timeout=0, delete=job)) is not None:
            done += 1
        if done != n:
            raise RuntimeError(f"drained {done} of {n} jobs")
        return {"seconds": time.perf_counter() - t0, "cpu": time.process_time() - c0}
    finally:
        q.close()


def _label(n: int, groups: int) -> str:
    size = f"{n // 1000}k" if n % 1000 == 0 else str(n)
    return f"groups: {groups:,} groups {size}, drain" if groups else \
        f"groups: no groups {size}, drain"


def run_groups(system: Any, n: int, groups: int) -> list[Sample]:
    """One run of both rows on ``system``, each in a fresh database."""
    out = []
    for g in (0, groups):
        with fresh(system):
            t = in_child(_drain, system, n, g)
        out.append(Sample(_label(n, g), n / t["seconds"],
                          f"{t['seconds'] * 1e6 / n:.1f} µs a job, {t['cpu'] * 1e6 / n:.1f} "
                          f"µs CPU", {"n": n, "groups": g, **t}))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=20_000)
    parser.add_argument("--groups", type=int, default=10_000)
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument("--backends", default="sqlite,postgres")
    args = parser.parse_args()
    from pg_peers import SqlqPg
    from systems import Sqlq

    systems = {"sqlite": Sqlq("normal"), "postgres": SqlqPg()}
    chosen = [systems[b] for b in args.backends.split(",")]
    values: dict[tuple[str, str], list[Sample]] = {}
    for run in range(args.runs):  # the systems take turns, run after run
        for system in chosen:
            for s in run_groups(system, args.jobs, args.groups):
                values.setdefault((system.name, s.metric), []).append(s)
                print(f"run {run + 1} {system.name:12} {s.metric:34} {s.value:10,.0f} jobs/s"
                      f"  ({s.notes})", flush=True)
    print("\nmedians (wall, and CPU of the draining process):")
    for system in chosen:
        rows = [(metric, samples) for (name, metric), samples in values.items()
                if name == system.name]
        med = {metric: (statistics.median(s.extra["seconds"] for s in samples),
                        statistics.median(s.extra["cpu"] for s in samples))
               for metric, samples in rows}
        for metric, (wall, cpu) in med.items():
            print(f"{system.name:12} {metric:34} {wall * 1e6 / args.jobs:8.1f} µs a job, "
                  f"{cpu * 1e6 / args.jobs:8.1f} µs CPU")
        plain, grouped = (med[_label(args.jobs, g)] for g in (0, args.groups))
        print(f"{system.name:12} ratio {args.groups:,} groups / no groups: wall "
              f"{grouped[0] / plain[0]:.2f}, CPU {grouped[1] / plain[1]:.2f}")
    for system in chosen:
        system.stop()
        server = getattr(system, "server", None)
        if server is not None:
            server.stop()


if __name__ == "__main__":
    main()
