"""Instructions per job (valgrind's callgrind) of sqlq's hot paths, in this checkout and
in others: a count, so it does not depend on how busy the machine is.

    .venv/bin/python bench/bench_callgrind.py [--trees . /path/to/baseline]
        [--workloads put,fill,cycle,fast,batch,fanin,chain] [--jobs 1000,3000] [--annotate DIR]
        [--body 64]

Each (tree, workload, n) runs once in a fresh process under ``valgrind --tool=callgrind``
(a new file in a temporary directory, durability ``normal``); the figure is
(total(n2) - total(n1)) / (n2 - n1): the instructions one more job costs, with the
start-up (the interpreter, imports, the migrations) subtracted out. Workloads:

* ``put``: ``q.put(body)`` n times;
* ``fill``: ``q.put_many`` of n bodies in batches of 5,000 (bench_single.py's fill);
* ``cycle``: the fill, then ``reserve(timeout=0)`` + ``job.delete()`` until empty
  (bench_single.py's drain); ``cycle - fill`` is the reserve+delete. (No workload of
  claims alone: with n jobs left reserved, the maintenance sqlq runs every so often,
  by the clock, looks at them, and callgrind slows the clock fifty-fold: such a count
  depends on how long the run took);
* ``fast``: the fill, then ``reserve(timeout=0, delete=job)`` until empty (the worker's
  loop, one commit a job); ``batch``: the fill, then ``reserve_many(10, timeout=0)`` +
  ``delete_many`` (issue 12's row 3, two commits a batch); ``batch / fast`` is row 3a's
  ratio as instructions;
* ``fanin``: the fill, one child ``put(after=every id)``, then the same drain (each
  parent's delete releases the child once; the child is drained last): ``fanin - cycle``
  is what a parent's release costs;
* ``chain``: n ``put(after=previous)``, then the same drain (each delete releases the
  next link);
* ``cursor``: one job reserved, then ``job.save_cursor("row", i)`` n times (issue 40:
  what one save costs; "a job" is a save here).
* ``gfill``, ``gfast``: ``fill`` and ``fast`` with the jobs spread over 10,000 groups
  (issue 38; ``put_many`` per group, the groups taking turns): ``gfast - gfill`` is the
  worker's loop in a tube of 10,000 groups, against ``fast - fill`` without (use n of
  10,000 or more, so that every group has jobs).

With three sizes or more (``--jobs 1000,3000,10000``) each pair of neighbours gives a
figure: equal figures mean a cost per job that does not grow with n (a release that is
O(1) per finished parent, whatever the fan-in or the chain's length).

``--annotate DIR`` keeps the callgrind files there and writes, for each workload,
``callgrind_annotate`` of its n2 run (inclusive costs by function), to see where a
difference between two trees comes from.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve()
#: The jobs' body: 64 bytes, or ``--body N`` (SQLQ_CALLGRIND_BODY to the children).
BODY = b"x" * int(os.environ.get("SQLQ_CALLGRIND_BODY", "64"))
GROUPS = 10_000  # the groups of gfill and gfast


def child(workload: str, jobs: int, tree: str) -> None:
    """The measured program (run under callgrind)."""
    sys.path.insert(0, tree)
    import sqlq

    with tempfile.TemporaryDirectory(prefix="sqlq-callgrind-") as tmp:
        q = sqlq.Queue(str(Path(tmp) / "q.db"), durability="normal")
        if workload == "cursor":  # issue 40: one job's cursor saved n times
            q.put(BODY)
            held = q.reserve(timeout=0)
            assert held is not None
            for i in range(jobs):
                held.save_cursor("row", i)
            held.delete()
            q.close()
            return
        if workload == "put":
            for _ in range(jobs):
                q.put(BODY)
        elif workload == "chain":
            prev = None
            for _ in range(jobs):
                prev = q.put(BODY, after=prev)
        elif workload in ("gfill", "gfast"):
            with q.transaction():
                for g in range(GROUPS):
                    q.put_many([BODY] * (jobs // GROUPS + (g < jobs % GROUPS)), group=f"g{g}")
        else:
            for start in range(0, jobs, 5000):
                q.put_many([BODY] * min(5000, jobs - start))
        if workload == "fanin":
            q.put(BODY, after=list(range(1, jobs + 1)))
            jobs += 1
        if workload in ("fast", "gfast"):  # the worker's loop: one commit a job
            done, job = 0, q.reserve(timeout=0)
            while job is not None:
                done += 1
                job = q.reserve(timeout=0, delete=job)
        elif workload == "batch":  # issue 12's row 3: two commits a batch of 10
            done, held = 0, q.reserve_many(10, timeout=0)
            while held:
                done += len(held)
                q.delete_many(held)
                held = q.reserve_many(10, timeout=0)
        if workload in ("fast", "gfast", "batch") and done != jobs:
            raise SystemExit(f"drained {done} of {jobs} jobs")
        if workload in ("cycle", "fanin", "chain"):
            done = 0
            while (job := q.reserve(timeout=0)) is not None:
                job.delete()
                done += 1
            if done != jobs:
                raise SystemExit(f"drained {done} of {jobs} jobs")
        q.close()


def total(tree: str, workload: str, jobs: int, out: Path) -> int:
    """The instructions of one run (callgrind's ``totals:`` line)."""
    subprocess.run(["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}",
                    sys.executable, str(HERE), "--child", workload, str(jobs), tree],
                   check=True, capture_output=True)
    text = out.read_text()
    match = re.search(r"^(?:totals|summary): (\d+)", text, re.M)
    if match is None:
        raise SystemExit(f"no totals in {out}")
    return int(match.group(1))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trees", nargs="+", default=[str(HERE.parent.parent)])
    parser.add_argument("--workloads", default="put,fill,cycle")
    parser.add_argument("--jobs", default="1000,3000")
    parser.add_argument("--annotate", help="keep the callgrind files and annotations here")
    parser.add_argument("--body", type=int, default=64,
                        help="the jobs' body in bytes (64: a task's arguments; larger ones "
                             "show what overflow pages cost)")
    parser.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child[0], int(args.child[1]), args.child[2])
        return
    for tree in args.trees:
        if not (Path(tree) / "sqlq" / "__init__.py").is_file():
            raise SystemExit(f"--trees takes checkouts (directories), not {tree!r}: for a "
                             "commit, `git archive REV | tar -x -C DIR` and pass DIR")
    sizes = [int(n) for n in args.jobs.split(",")]
    os.environ["SQLQ_CALLGRIND_BODY"] = str(args.body)  # the children's BODY
    high = sizes[-1]
    keep = Path(args.annotate) if args.annotate else None
    if keep:
        keep.mkdir(parents=True, exist_ok=True)
    print(f"instructions per job, (total(n2) - total(n1)) / (n2 - n1) for n in {sizes}, "
          f"{args.body}-byte bodies, python {sys.version.split()[0]}", flush=True)
    with tempfile.TemporaryDirectory(prefix="sqlq-callgrind-out-") as name:
        where = keep or Path(name)
        for workload in args.workloads.split(","):
            for tree in args.trees:
                tree = str(Path(tree).resolve())
                label = re.sub(r"\W+", "-", tree.strip("/"))
                # Once outside valgrind first: a tree whose modules have no .pyc yet (a
                # fresh `git archive`, a file just edited) compiles them in its first run,
                # which then counts millions more and makes the figure wrong, even negative.
                subprocess.run([sys.executable, str(HERE), "--child", workload, "10", tree],
                               check=True, capture_output=True)
                counts = [total(tree, workload, n, where / f"{label}.{workload}.{n}.out")
                          for n in sizes]
                per_job = [f"{(c2 - c1) / (n2 - n1) / 1000:.1f}k ({n1}->{n2})"
                           for n1, n2, c1, c2 in zip(sizes, sizes[1:], counts, counts[1:],
                                                     strict=False)]
                print(f"{workload:6} {tree:32} instructions a job: {', '.join(per_job)} "
                      f"(totals {' / '.join(f'{c:,}' for c in counts)})", flush=True)
                if keep:
                    annotated = subprocess.run(
                        ["callgrind_annotate", "--inclusive=yes",
                         str(where / f"{label}.{workload}.{high}.out")],
                        check=True, capture_output=True, text=True).stdout
                    (keep / f"{label}.{workload}.{high}.txt").write_text(annotated)


if __name__ == "__main__":
    os.environ.setdefault("PYTHONHASHSEED", "0")
    main()
