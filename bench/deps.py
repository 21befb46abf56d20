"""Job dependencies (issue 24, ``after=``): a fan-in and a chain, on a file and on
PostgreSQL. ``bench/run.py --workloads deps`` runs them (sqlq-normal, and sqlq-pg when
named in ``--systems``); standalone, with no peer and no RESULTS.md:

    .venv-bench/bin/python bench/deps.py [--sizes 1000,10000] [--runs 2]
                                         [--backends sqlite,postgres]

* **fan-in N**: N parents (put_many, not timed), then one child ``put(after=N ids)``:
  *put* is N / the seconds of that one put (edges a second); then the parents are
  drained one at a time (``reserve(delete=prev)``, the worker's loop) until the claim
  returns the child: *drain* is N / those seconds (parents a second). Every parent's
  delete releases the same child (its counter goes down by one).
* **chain N**: N jobs, each ``put(after=previous)``: *put* is N / seconds; then the
  same loop drains it end to end, each delete releasing the next link: *drain*.
* **no deps N**: N plain jobs drained by the same loop: the reference, so that the
  notes can say what a release costs on top of a delete.

All at durability normal, whatever the system's class (no fsync per commit: the rows
show what a release costs, not what the disk does).

A release costs one primary-key range of the edges and one probe per child, never a
scan, so the per-parent cost must be flat from 1k to 10k: the notes give µs per job,
and the rows at both sizes let the two be compared.
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


def _queue(system: Any) -> Any:
    """A sqlq.Queue at durability normal (the setup client of sqlq-normal, sqlq-full,
    sqlq-pg): no fsync per commit, so that the rows show what a release costs, not what
    the disk does."""
    return system.client(setup=True).q


class Tenths:
    """The time of a loop of n steps, and of its first and last tenth: a cost per step
    that grows with n (a scan) shows as a last tenth slower than the first."""

    def __init__(self, n: int) -> None:
        self.n, self.marks = n, [time.perf_counter()]

    def step(self, i: int) -> None:
        """After step i (0-based)."""
        if (i + 1) % max(1, self.n // 10) == 0:
            self.marks.append(time.perf_counter())

    def result(self) -> dict[str, float]:
        end = time.perf_counter()
        tenth = max(1, self.n // 10)
        return {"seconds": end - self.marks[0],
                "first": (self.marks[1] - self.marks[0]) / tenth if len(self.marks) > 2 else 0,
                "last": (self.marks[-1] - self.marks[-2]) / tenth if len(self.marks) > 2 else 0}


def _drain_until(q: Any, n: int, last: int | None) -> dict[str, float]:
    """Claim-and-delete (the worker's loop) until ``last`` is claimed after n others, or
    (None) until the n jobs are gone: the seconds, and a tenth's seconds per job."""
    job = None
    clock = Tenths(n)
    done = 0
    while True:
        job = q.reserve([TUBE], timeout=0, delete=job)
        if job is None or job.id == last:
            break
        clock.step(done)
        done += 1
    took = clock.result()
    if job is not None:
        job.delete()
    if done != n:
        raise RuntimeError(f"drained {done} of {n} jobs before {last or 'the end'}")
    return took


def _fan_in(system: Any, n: int) -> dict[str, dict[str, float]]:
    q = _queue(system)
    try:
        parents: list[int] = []
        for lo in range(0, n, FILL_BATCH):
            parents += q.put_many([body(i) for i in range(lo, min(lo + FILL_BATCH, n))],
                                  tube=TUBE)
        t0 = time.perf_counter()
        child = q.put(b"child", tube=TUBE, after=parents)
        put = time.perf_counter() - t0
        if q.peek(child).state != "waiting":
            raise RuntimeError(f"the fan-in's child is {q.peek(child).state}, not waiting")
        return {"put": {"seconds": put}, "drain": _drain_until(q, n, child)}
    finally:
        q.close()


def _chain(system: Any, n: int) -> dict[str, dict[str, float]]:
    q = _queue(system)
    try:
        clock = Tenths(n)
        prev = None
        for i in range(n):
            prev = q.put(body(i), tube=TUBE, after=prev)
            clock.step(i)
        return {"put": clock.result(), "drain": _drain_until(q, n, None)}
    finally:
        q.close()


def _plain(system: Any, n: int) -> dict[str, dict[str, float]]:
    q = _queue(system)
    try:
        for lo in range(0, n, FILL_BATCH):
            q.put_many([body(i) for i in range(lo, min(lo + FILL_BATCH, n))], tube=TUBE)
        return {"drain": _drain_until(q, n, None)}
    finally:
        q.close()


def _short(n: int) -> str:
    return f"{n // 1000}k" if n % 1000 == 0 else str(n)


def _sample(metric: str, n: int, t: dict[str, float], what: str) -> Sample:
    seconds = t["seconds"]
    notes = f"{seconds * 1e6 / n:.1f} µs per {what}"
    if t.get("first"):
        notes += f" (first tenth {t['first'] * 1e6:.0f}, last {t['last'] * 1e6:.0f})"
    return Sample(metric, n / seconds, notes, {"n": n, **t})


def run_deps(system: Any, sizes: list[int]) -> list[Sample]:
    """One run of every dependency row on ``system``, each in a fresh database."""
    out: list[Sample] = []
    for n in sizes:
        with fresh(system):
            t = in_child(_fan_in, system, n)
        out += [_sample(f"deps: fan-in {_short(n)}, put", n, t["put"], "edge"),
                _sample(f"deps: fan-in {_short(n)}, drain", n, t["drain"], "parent")]
        with fresh(system):
            t = in_child(_chain, system, n)
        out += [_sample(f"deps: chain {_short(n)}, put", n, t["put"], "link"),
                _sample(f"deps: chain {_short(n)}, drain", n, t["drain"], "link")]
        with fresh(system):
            t = in_child(_plain, system, n)
        out.append(_sample(f"deps: no deps {_short(n)}, drain", n, t["drain"], "job"))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000,10000")
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument("--backends", default="sqlite,postgres")
    args = parser.parse_args()
    from pg_peers import SqlqPg
    from systems import Sqlq

    sizes = [int(s) for s in args.sizes.split(",")]
    systems = {"sqlite": Sqlq("normal"), "postgres": SqlqPg()}
    chosen = [systems[b] for b in args.backends.split(",")]
    values: dict[tuple[str, str], list[Sample]] = {}
    for run in range(args.runs):  # the systems take turns, run after run
        for system in chosen:
            for s in run_deps(system, sizes):
                values.setdefault((system.name, s.metric), []).append(s)
                print(f"run {run + 1} {system.name:12} {s.metric:26} {s.value:10,.0f} jobs/s"
                      f"  ({s.notes})", flush=True)
    print("\nmedians:")
    for (name, metric), samples in values.items():
        med = statistics.median(s.value or 0.0 for s in samples)
        print(f"{name:12} {metric:26} {med:10,.0f} jobs/s  {1e6 / med:8.1f} µs a job  "
              f"runs: {', '.join(f'{s.value:,.0f}' for s in samples)}")
    for system in chosen:
        system.stop()
        server = getattr(system, "server", None)
        if server is not None:
            server.stop()


if __name__ == "__main__":
    main()
