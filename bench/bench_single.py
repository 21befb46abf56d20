"""The one-job-at-a-time paths against a bare apsw loop: single ``put`` and a drain of
``reserve(timeout=0)`` then ``job.delete()``, each next to the same loop written with apsw
alone, once over sqlq's own table and indexes (what sqlq's Python and SQL cost) and once
over a minimal table (what the schema costs). Reported, not asserted (issue 12's target:
sqlq >= 0.9x the bare loop with the same schema).

    .venv/bin/python bench/bench_single.py [--jobs 5000] [--runs 5]
                                           [--durability normal,full] [--profile]
                                           [--baseline /path/to/another/checkout]

Each run uses a fresh file in a temporary directory; the systems take turns within a
run, so drift on a shared machine hits them alike. The median of the runs is printed
with the spread (half the range over the median) and the ratio to the bare loop over
sqlq's schema; ``--baseline`` adds sqlq as checked out elsewhere (before a change) as one
more system. Every measurement runs in a fresh child process, and reports jobs a second
(wall clock) and CPU microseconds a job (steadier on a shared machine). ``--profile``
also counts, for sqlq, the SQL statements per job (apsw's exec trace) and the WAL frames
(pages) each commit writes.

The bare loops commit every statement on its own as sqlq does (a claim, then a
delete) with ``synchronous`` at the level sqlq uses for that commit: FULL for puts
and deletes in ``full`` mode, NORMAL for claims (a lost claim only hands the job
out again) and for everything in ``normal`` mode.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(os.environ.get("SQLQ_BENCH_ROOT") or Path(__file__).resolve().parent.parent)
sys.path.insert(0, str(ROOT))

import apsw  # noqa: E402

import sqlq  # noqa: E402

BODY = b"x" * 64
TUBE = "default"

# The same loop on sqlq's own table: the file is made by sqlq (its migrations), so the
# floor follows any schema change.
SAME_PUT = ("INSERT INTO sqlq_jobs (tube, priority, state, delay, delay_until, ttr, body, "
            "created_at, unique_key) VALUES (?, 1024, 0, 0, NULL, 60000, ?, ?, NULL)")
# The tube through (SELECT ?3), as sqlq's own claim binds it: a bare ?3 on an indexed
# column makes SQLite built with STAT4 prepare the statement again on every run once
# the file has statistics, which would make the floor slower than it needs to be.
SAME_CLAIM = """
UPDATE sqlq_jobs SET state = 2, reserved_until = ?1 + ttr, reserves = reserves + 1,
       lease = abs(random()), owner = ?2
 WHERE id = (SELECT id FROM sqlq_jobs WHERE state = 0 AND tube = (SELECT ?3)
             ORDER BY priority, id LIMIT 1)
RETURNING id, body, lease"""
SAME_DELETE = ("DELETE FROM sqlq_jobs WHERE id = ? AND state = 2 AND lease = ? "
               "AND reserved_until > ?")

# The least a queue with priorities and leases needs: one table, one index, no sequence.
MINIMAL_SCHEMA = """
CREATE TABLE jobs (id INTEGER PRIMARY KEY, tube TEXT NOT NULL, priority INTEGER NOT NULL,
                   body BLOB NOT NULL, lease INTEGER, reserved_until INTEGER);
CREATE INDEX jobs_ready ON jobs (tube, priority, id) WHERE lease IS NULL;
"""
MINIMAL_PUT = "INSERT INTO jobs (tube, priority, body) VALUES (?, 1024, ?)"
MINIMAL_CLAIM = """
UPDATE jobs SET lease = abs(random()), reserved_until = ?1 + 60000
 WHERE id = (SELECT id FROM jobs WHERE lease IS NULL AND tube = (SELECT ?3)
             ORDER BY priority, id LIMIT 1)
RETURNING id, body, lease"""
MINIMAL_DELETE = "DELETE FROM jobs WHERE id = ? AND lease = ? AND reserved_until > ?"


def now_ms() -> int:
    return time.time_ns() // 1_000_000


class Bare:
    """The loop a user would write with apsw alone, one autocommit statement per step."""

    def __init__(self, path: str, durability: str, schema: str | None, put: str, claim: str,
                 delete: str) -> None:
        if schema is None:  # sqlq's own schema, made by sqlq (this is a child process)
            sqlq.Queue(path).close()
        self.conn = apsw.Connection(path)
        self.conn.execute("PRAGMA journal_mode = WAL")
        if schema is not None:
            self.conn.execute(schema)
        self.full = durability == "full"
        self.sql = (put, claim, delete)
        self._sync(self.full)

    def _sync(self, full: bool) -> None:
        self.conn.execute(f"PRAGMA synchronous = {'FULL' if full else 'NORMAL'}")
        self.synced = full

    def put(self) -> None:
        if self.full and not self.synced:
            self._sync(True)
        if self.sql[0] is SAME_PUT:
            self.conn.execute(SAME_PUT, (TUBE, BODY, now_ms()))
        else:
            self.conn.execute(MINIMAL_PUT, (TUBE, BODY))

    def fill(self, n: int) -> None:
        with self.conn:
            for _ in range(n):
                self.put()

    def drain_one(self) -> bool:
        if self.full and self.synced:
            self._sync(False)  # a claim needs no fsync, as in sqlq
        row = self.conn.execute(self.sql[1], (now_ms(), "owner", TUBE)).fetchone()
        if row is None:
            return False
        if self.full:
            self._sync(True)
        self.conn.execute(self.sql[2], (row[0], row[2], now_ms()))
        return True

    def close(self) -> None:
        self.conn.close()


class Sqlq:
    def __init__(self, path: str, durability: str) -> None:
        self.q = sqlq.Queue(path, durability=durability)  # type: ignore[arg-type]

    def put(self) -> None:
        self.q.put(BODY)

    def fill(self, n: int) -> None:
        for start in range(0, n, 5000):
            self.q.put_many([BODY] * min(5000, n - start))

    def drain_one(self) -> bool:
        job = self.q.reserve(timeout=0)
        if job is None:
            return False
        job.delete()
        return True

    def close(self) -> None:
        self.q.close()


SYSTEMS: dict[str, Callable[[str, str], Any]] = {
    "sqlq": Sqlq,
    "bare, sqlq's schema": lambda p, d: Bare(p, d, None, SAME_PUT, SAME_CLAIM, SAME_DELETE),
    "bare, minimal schema": lambda p, d: Bare(p, d, MINIMAL_SCHEMA, MINIMAL_PUT,
                                              MINIMAL_CLAIM, MINIMAL_DELETE),
}


def measure(system_name: str, workload: str, jobs: int, durability: str, tmp: Path,
            baseline: str | None) -> tuple[float, float]:
    """One run in a child process (``baseline``: sqlq imported from that checkout)."""
    env = dict(os.environ)
    if system_name == "sqlq @ baseline":
        env["SQLQ_BENCH_ROOT"] = str(baseline)
        system_name = "sqlq"
    args = [sys.executable, __file__, "--child",
            json.dumps([system_name, workload, jobs, durability, str(tmp)])]
    out = subprocess.run(args, env=env, check=True, capture_output=True, text=True).stdout
    rate, cpu = out.split()
    return float(rate), float(cpu)


def run_child(system_name: str, workload: str, jobs: int, durability: str, tmp: str
              ) -> tuple[float, float]:
    """(jobs a second, CPU microseconds a job) of one run."""
    path = str(Path(tmp) / f"{os.urandom(6).hex()}.db")
    system = SYSTEMS[system_name](path, durability)
    try:
        if workload == "put":
            began, cpu = time.perf_counter(), time.process_time()
            for _ in range(jobs):
                system.put()
            took, cpu = time.perf_counter() - began, time.process_time() - cpu
        else:
            system.fill(jobs)
            done = 0
            began, cpu = time.perf_counter(), time.process_time()
            while system.drain_one():
                done += 1
            took, cpu = time.perf_counter() - began, time.process_time() - cpu
            if done != jobs:
                raise SystemExit(f"drained {done} of {jobs} jobs")
    finally:
        system.close()
    return jobs / took, cpu / jobs * 1e6


def profile(durability: str, jobs: int, tmp: Path) -> None:
    """Statements per job and WAL frames per commit of sqlq's put and one-at-a-time drain."""
    path = str(tmp / f"profile-{durability}.db")
    system = Sqlq(path, durability)
    conn = system.q.backend.db.conn  # type: ignore[attr-defined]
    conn.execute("PRAGMA wal_autocheckpoint = 0")
    seen: list[str] = []
    frames: list[int] = []

    def trace(cursor: Any, sql: str, bindings: Any) -> bool:
        words = [w for line in sql.splitlines() if not line.lstrip().startswith("--")
                 for w in line.split()]
        seen.append(words[0].upper() if words else "?")
        return True

    def wal(c: Any, name: str, pages: int) -> int:
        frames.append(pages)
        return 0

    conn.set_wal_hook(wal)
    for workload in ("put", "drain"):
        if workload == "drain":
            system.fill(jobs)
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        frames.clear()
        conn.set_exec_trace(trace)
        seen.clear()
        done = jobs
        if workload == "put":
            for _ in range(jobs):
                system.put()
        else:
            done = 0
            while system.drain_one():
                done += 1
        conn.set_exec_trace(None)
        jobs = done
        commits = len(frames)
        steps = [b - a for a, b in zip([0, *frames], frames, strict=False)]
        kinds = ", ".join(f"{k} {seen.count(k) / jobs:.2f}" for k in dict.fromkeys(seen))
        print(f"profile {durability:6} {workload:5}: {len(seen) / jobs:.2f} statements a job "
              f"({kinds}); {commits / jobs:.2f} commits a job, "
              f"{statistics.mean(steps):.2f} WAL frames a commit", flush=True)
    system.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=5000)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--durability", default="normal,full")
    parser.add_argument("--workloads", default="put,drain")
    parser.add_argument("--profile", action="store_true")
    parser.add_argument("--baseline", help="another checkout of sqlq to measure too")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(*run_child(*json.loads(args.child)))
        return
    systems = list(SYSTEMS) + (["sqlq @ baseline"] if args.baseline else [])
    print(f"apsw {apsw.apsw_version()}, SQLite {apsw.sqlite_lib_version()}, "
          f"{args.jobs} jobs, {args.runs} runs", flush=True)
    with tempfile.TemporaryDirectory(prefix="sqlq-bench-single-") as name:
        tmp = Path(name)
        for durability in args.durability.split(","):
            if args.profile:
                profile(durability, min(args.jobs, 2000), tmp)
            for workload in args.workloads.split(","):
                rates: dict[str, list[float]] = {s: [] for s in systems}
                cpus: dict[str, list[float]] = {s: [] for s in systems}
                for _ in range(args.runs):
                    order = list(systems)
                    random.shuffle(order)
                    for system in order:
                        rate, cpu = measure(system, workload, args.jobs, durability, tmp,
                                            args.baseline)
                        rates[system].append(rate)
                        cpus[system].append(cpu)
                base = statistics.median(rates["bare, sqlq's schema"])
                base_cpu = statistics.median(cpus["bare, sqlq's schema"])
                for system, values in rates.items():
                    median = statistics.median(values)
                    spread = (max(values) - min(values)) / 2 / median
                    cpu = statistics.median(cpus[system])
                    cpu_spread = (max(cpus[system]) - min(cpus[system])) / 2 / cpu
                    print(f"{durability:6} {workload:5} {system:22} {median:9,.0f} jobs/s "
                          f"±{spread:4.0%} {median / base:5.2f}x | CPU {cpu:6.1f} us/job "
                          f"±{cpu_spread:4.0%} {base_cpu / cpu:5.2f}x  (ratios: to the bare "
                          "loop on sqlq's schema, above 1 is faster)", flush=True)


if __name__ == "__main__":
    main()
