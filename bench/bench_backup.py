"""How to copy a live sqlq file (``sqlq backup``): ``VACUUM INTO`` against SQLite's online
backup API, in one step and in steps, on a file of many jobs while another process puts,
reserves and deletes jobs in a loop (durability ``full``). For each: how long the copy
took, how many steps it needed, the copy's size and integrity check, and the writer's
operations and latencies (median, p99, max) over the same seconds, with no copy as the
baseline. docs/operations.md#backups gives the figures.

    .venv/bin/python bench/bench_backup.py [--jobs 100000] [--seconds 4] [--dir /tmp/bk]

A stepped backup starts again whenever another connection writes between two steps: it
finishes when the writer stops (``--seconds``), not before.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import apsw

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import sqlq  # noqa: E402 - the checkout's sqlq, found through ROOT

WRITER = r"""
import sys, time, sqlq
q = sqlq.Queue(sys.argv[1])
lat = []
stop = time.monotonic() + float(sys.argv[2])
print("ready", flush=True)
while time.monotonic() < stop:
    t = time.monotonic()
    q.put(b"y" * 200, tube="w")
    q.delete(q.reserve("w", timeout=0).id)
    lat.append(time.monotonic() - t)
lat.sort()
print(len(lat), lat[len(lat) // 2] * 1e3, lat[int(len(lat) * .99)] * 1e3, lat[-1] * 1e3)
"""


def backup_api(src: str, pages: int) -> Callable[[str], str]:
    def copy(dst: str) -> str:
        source, target, steps = apsw.Connection(src), apsw.Connection(dst), 0
        with target.backup("main", source, "main") as b:
            while not b.done:
                b.step(pages)
                steps += 1
        target.close()
        source.close()
        return f"steps={steps}"
    return copy


def vacuum_into(src: str) -> Callable[[str], str]:
    def copy(dst: str) -> str:
        source = apsw.Connection(src)
        source.execute("VACUUM INTO ?", (dst,))
        source.close()
        return "steps=1"
    return copy


def nothing(dst: str) -> str:
    apsw.Connection(dst).execute("CREATE TABLE sqlq_jobs (x)")
    return "(baseline)"


def run(name: str, src: str, copy: Callable[[str], str], seconds: float, out: Path) -> None:
    dst = str(out / f"copy-{name}.db")
    for suffix in ("", "-wal", "-shm", "-journal"):
        Path(dst + suffix).unlink(missing_ok=True)
    writer = subprocess.Popen([sys.executable, "-c", WRITER, src, str(seconds)],
                              stdout=subprocess.PIPE, text=True,
                              env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert writer.stdout is not None
    writer.stdout.readline()
    time.sleep(seconds / 8)  # the writer in its stride before the copy starts
    started = time.monotonic()
    what = copy(dst)
    took = time.monotonic() - started
    ops, p50, p99, worst = writer.stdout.read().split()
    writer.wait()
    conn = apsw.Connection(dst)
    mode = conn.execute("PRAGMA journal_mode").fetchall()[0][0]
    check = conn.execute("PRAGMA integrity_check").fetchall()[0][0]
    jobs = conn.execute("SELECT count(*) FROM sqlq_jobs").fetchall()[0][0]
    conn.close()
    print(f"{name:16s} {took * 1e3:7.0f} ms {what:12s} {os.path.getsize(dst) / 1e6:5.1f} MB "
          f"{mode:6s} {check:3s} {jobs:7d} jobs | writer {ops:>5s} ops, p50 {float(p50):.2f}"
          f" p99 {float(p99):.2f} max {float(worst):.1f} ms")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=100_000)
    parser.add_argument("--seconds", type=float, default=4.0)
    parser.add_argument("--dir", default="/tmp/sqlq-bench-backup")
    args = parser.parse_args()
    out = Path(args.dir)
    out.mkdir(parents=True, exist_ok=True)
    src = str(out / f"source-{args.jobs}.db")
    if not os.path.exists(src):
        with sqlq.Queue(src, durability="normal") as q:
            for start in range(0, args.jobs, 1000):
                q.put_many([b"x" * 200] * min(1000, args.jobs - start), tube="t")
    for name, copy in [("no copy", nothing), ("VACUUM INTO", vacuum_into(src)),
                       ("backup, 1 step", backup_api(src, -1)),
                       ("backup, 1000 p", backup_api(src, 1000))]:
        run(name, src, copy, args.seconds, out)


if __name__ == "__main__":
    main()
