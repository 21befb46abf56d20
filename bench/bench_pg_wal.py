"""What one put and one reserve-then-delete write to PostgreSQL's WAL, for sqlq and for
the raw psycopg loop of issue 12's rows 7pg-a/b (``pg_peers.py``): WAL records, bytes,
writes and fsyncs per job, from ``pg_stat_wal``. Unlike jobs a second, these counts do
not depend on how busy the machine is, so two checkouts compare exactly.

    .venv/bin/python bench/bench_pg_wal.py [--jobs 500] [--baseline /path/to/checkout]

A throwaway server of its own (``tests/pgserver.py``, fsync and synchronous commit on),
so no other session's WAL is counted; a fresh database per system. Each phase runs on
connections of its own, closed before the counters are read (a session reports its
WAL statistics when it ends). ``--baseline`` runs sqlq as checked out elsewhere too (in
a child process, which imports that checkout's sqlq).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))

import psycopg  # noqa: E402
from pg_peers import RAW_PG_PUT, RAW_PG_SCHEMA, RAW_PG_TAKE, _pgserver  # noqa: E402

BODY = b"x" * 100
FIELDS = ("records", "bytes", "writes", "fsyncs")


def per_job(admin: Any, jobs: int, phase: Callable[[], None]) -> dict[str, float]:
    """pg_stat_wal's counters over phase, per job."""
    query = "SELECT wal_records, wal_bytes, wal_write, wal_sync FROM pg_stat_wal"
    time.sleep(0.3)  # sessions that ended before (the schema's) have reported theirs
    before = admin.execute(query).fetchone()
    phase()
    time.sleep(0.3)  # the phase's sessions have ended; their statistics are in
    after = admin.execute(query).fetchone()
    return {f: round(float(b - a) / jobs, 2) for f, a, b in zip(FIELDS, before, after, strict=True)}


def raw(url: str, admin: Any, jobs: int) -> dict[str, dict[str, float]]:
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(RAW_PG_SCHEMA)

    def put() -> None:
        with psycopg.connect(url, autocommit=True) as conn:
            for _ in range(jobs):
                conn.execute(RAW_PG_PUT, {"tube": "bench", "body": BODY})

    def take_delete() -> None:
        with psycopg.connect(url, autocommit=True) as conn:
            while (row := conn.execute(RAW_PG_TAKE, {"prev": None, "tube": "bench"})
                   .fetchone()) is not None:
                conn.execute("DELETE FROM jobs WHERE id = %s", (row[0],))

    return {"put": per_job(admin, jobs, put),
            "reserve+delete": per_job(admin, jobs, take_delete)}


def sqlq_side(url: str, admin: Any, jobs: int) -> dict[str, dict[str, float]]:
    import sqlq

    sqlq.Queue(url).close()  # the schema

    def put() -> None:
        with sqlq.Queue(url) as q:
            for _ in range(jobs):
                q.put(BODY)

    def reserve_delete() -> None:
        with sqlq.Queue(url) as q:
            while (job := q.reserve(timeout=0)) is not None:
                job.delete()

    return {"put": per_job(admin, jobs, put),
            "reserve+delete": per_job(admin, jobs, reserve_delete)}


def child(checkout: str, url: str, admin_url: str, jobs: int) -> dict[str, Any]:
    """sqlq_side in a child process importing the sqlq of another checkout."""
    code = (f"import sys, json; sys.path[:0] = [{checkout!r}, {str(ROOT / 'bench')!r}];"
            "import psycopg, bench_pg_wal as b;"
            f"a = psycopg.connect({admin_url!r}, autocommit=True);"
            f"print(json.dumps(b.sqlq_side({url!r}, a, {jobs})))")
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True,
                         text=True, cwd=checkout)
    result: dict[str, Any] = json.loads(out.stdout)
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=500)
    parser.add_argument("--baseline", help="another checkout of sqlq, measured the same way")
    args = parser.parse_args()
    server = _pgserver().PgServer(durable=True).start()
    try:
        admin = psycopg.connect(server.url, autocommit=True)
        sides: dict[str, Any] = {}
        for name in ("raw-pg", "sqlq", "baseline"):
            if name == "baseline" and not args.baseline:
                continue
            admin.execute(f"CREATE DATABASE {name.replace('-', '_')}")
            url = server.url_for(name.replace("-", "_"))
            if name == "raw-pg":
                sides[name] = raw(url, admin, args.jobs)
            elif name == "sqlq":
                sides[name] = sqlq_side(url, admin, args.jobs)
            else:
                sides[name] = child(args.baseline, url, server.url, args.jobs)
        print(f"per job, {args.jobs} jobs; " + ", ".join(FIELDS))
        for name, result in sides.items():
            for workload, counts in result.items():
                print(f"  {name:9s} {workload:15s} " + "  ".join(
                    f"{f} {counts[f]:g}" for f in FIELDS))
    finally:
        server.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
