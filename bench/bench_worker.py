"""How much a worker costs: no-op tasks drained by ``sqlq work`` next to a raw loop.

    .venv/bin/python bench/bench_worker.py [--jobs 3000] [--durability full|normal]
        [--task-ms 1] [--prefetch N|auto] [--processes 1 4] [--concurrency 8]

Prints jobs/s for:

* ``raw reserve(delete=)``: one process, ``job = q.reserve(delete=previous)``, the
  one-commit-per-job loop the worker itself uses: the ceiling.
* ``raw reserve + delete``: the same with two commits per job (what a naive loop does).
* ``sqlq work --processes N`` for N = 1, 2, 4: real ``python -m sqlq work --burst``
  runs on a no-op task. The start-up time of an empty run is measured and
  subtracted, so the figure is the draining rate; the gap to the raw figure is the
  worker's own overhead (decoding the call, the task thread, logging).
  ``--task-ms`` makes the task sleep that long (jobs that take real time, where
  several processes should scale); ``--prefetch`` is passed on to ``sqlq work``.
  ``--concurrency N`` runs the event-loop worker (``sqlq work --concurrency N``) on
  an ``async def`` task instead (its pause an ``asyncio.sleep``).

Standalone on purpose (bench/run.py owns the comparison with peers).
"""

from __future__ import annotations

import argparse
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))

import sqlq  # noqa: E402

TASK_MODULE = '''
import asyncio, os, time, sqlq
q = sqlq.Queue(os.environ["SQLQ_DB"], durability=os.environ["SQLQ_BENCH_DURABILITY"])
PAUSE = float(os.environ.get("SQLQ_BENCH_TASK_MS", "0")) / 1000

@q.task(tube="bench")
def noop():
    if PAUSE:
        time.sleep(PAUSE)
    return None

@q.task(tube="bench")
async def anoop():
    if PAUSE:
        await asyncio.sleep(PAUSE)
    return None
'''


def fill(db: str, n: int, durability: str, task: str = "noop") -> None:
    """Put n no-op task calls in one transaction."""
    with sqlq.Queue(db, durability=durability) as q:  # type: ignore[arg-type]
        body = b'{"task":"bench_noop_tasks.%s","args":[],"kwargs":{}}' % task.encode()
        q.put_many([body] * n, tube="bench")


def raw(db: str, n: int, durability: str, fast: bool) -> float:
    fill(db, n, durability)
    with sqlq.Queue(db, durability=durability) as q:  # type: ignore[arg-type]
        started = time.perf_counter()
        done = 0
        job = q.reserve("bench", timeout=0)
        while job is not None:
            if fast:
                job = q.reserve("bench", timeout=0, delete=job)
            else:
                job.delete()
                job = q.reserve("bench", timeout=0)
            done += 1
        elapsed = time.perf_counter() - started
    assert done == n, done
    return n / elapsed


def work(db: str, n: int, processes: int, durability: str, tasks_dir: str,
         extra: tuple[str, ...] = ()) -> float:
    """Seconds for ``sqlq work --burst`` to drain n jobs with this many processes."""
    if n:
        fill(db, n, durability, "anoop" if "--concurrency" in extra else "noop")
    env = dict(os.environ, SQLQ_DB=db, SQLQ_BENCH_DURABILITY=durability,
               PYTHONPATH=os.pathsep.join([tasks_dir, str(ROOT)]))
    argv = [sys.executable, "-m", "sqlq", "--db", db, "work", "--import", "bench_noop_tasks",
            "--burst", "--processes", str(processes), "--durability", durability,
            "--log-level", "WARNING", *extra]
    started = time.perf_counter()
    subprocess.run(argv, env=env, check=True)
    elapsed = time.perf_counter() - started
    with sqlq.Queue(db) as q:
        left = q.stats()["current-jobs-ready"]
    assert left == 0, f"{left} jobs left"
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=3000)
    parser.add_argument("--durability", choices=["full", "normal"], default="full")
    parser.add_argument("--processes", type=int, nargs="+", default=[1, 2, 4])
    parser.add_argument("--task-ms", type=float, default=0.0,
                        help="each task sleeps this long (default: a no-op)")
    parser.add_argument("--prefetch", default=None, help="passed on to sqlq work")
    parser.add_argument("--concurrency", type=int, default=None,
                        help="passed on to sqlq work: the event-loop worker on an async task")
    parser.add_argument("--no-raw", action="store_true", help="skip the raw loops")
    args = parser.parse_args()
    os.environ["SQLQ_BENCH_TASK_MS"] = str(args.task_ms)
    extra: tuple[str, ...] = ("--prefetch", args.prefetch) if args.prefetch else ()
    if args.concurrency is not None:
        extra += ("--concurrency", str(args.concurrency))
    n = args.jobs
    with tempfile.TemporaryDirectory(prefix="sqlq-bench-worker-") as tmp:
        Path(tmp, "bench_noop_tasks.py").write_text(TASK_MODULE)
        print(f"# sqlq worker bench: {n} jobs of {args.task_ms:g} ms, "
              f"durability={args.durability}, prefetch={args.prefetch or 'default'}, "
              f"concurrency={args.concurrency or 'none'}, "
              f"{os.cpu_count()} CPUs, Python {platform.python_version()}, "
              f"SQLite {sqlq.Queue.__module__ and __import__('apsw').sqlite_lib_version()}")
        rows: list[tuple[str, float]] = []
        for fast, label in ((True, "raw reserve(delete=)"), (False, "raw reserve + delete")
                            )[:0 if args.no_raw else 2]:
            rows.append((label, raw(os.path.join(tmp, f"raw{fast}.db"), n, args.durability,
                                    fast)))
        for p in args.processes:
            db = os.path.join(tmp, f"work{p}.db")
            startup = min(work(db, 0, p, args.durability, tmp, extra) for _ in range(2))
            total = work(db, n, p, args.durability, tmp, extra)
            rows.append((f"sqlq work --processes {p}", n / max(total - startup, 1e-9)))
            print(f"#   --processes {p}: {total:.2f}s with jobs, {startup:.2f}s empty start-up",
                  file=sys.stderr)
        ceiling = rows[0][1]
        print(f"{'loop':<28}{'jobs/s':>10}{'of first':>9}")
        for label, rate in rows:
            print(f"{label:<28}{rate:>10.0f}{rate / ceiling:>9.0%}")


if __name__ == "__main__":
    main()
