"""Retention of finished records at scale (issue 39): a SQLite file's size after a big drain
and what its prune costs, with the file's ``auto_vacuum`` NONE (a file made before
migration 2) and INCREMENTAL (made since); PostgreSQL's prune by batched ``DELETE``
against a ``DETACH`` + ``DROP`` of a partition holding the same rows, with the longest put
of a concurrent put loop during each. Reported, not asserted (docs/operations.md,
"Retention").

    .venv/bin/python bench/bench_retention.py sqlite [--jobs 1000000] [--mode none,incremental]
    .venv/bin/python bench/bench_retention.py postgres [--jobs 1000000]

PostgreSQL runs on a throwaway server (tests/pgserver.py), as the tests' does.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sqlite3
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import sqlq  # noqa: E402

BODY = b'{"task": "send", "to": "user@example.com", "n": 12345}'
#: A record as the prune finds it, for PostgreSQL's fill (written with SQL, not drained).
RECORDS = """INSERT INTO {table} (id, tube, outcome, ended_at, worker, ran, attempts,
                                  created_at, unique_key, body)
             SELECT i, 'default', 'done', 1700000000000 + i, 'w', 5, 1, 1700000000000 + i,
                    NULL, '\\x7b227461736b223a202273656e64227d'::bytea
               FROM generate_series(1, %s) AS i"""


def sqlite_run(n: int, mode: str, directory: str) -> None:
    path = os.path.join(directory, f"{mode}.db")
    conn = sqlite3.connect(path)  # the mode is set before any table, as sqlq's migrate does
    conn.execute(f"PRAGMA auto_vacuum = {mode.upper()}")
    conn.execute("CREATE TABLE t (a)")
    conn.execute("DROP TABLE t")
    conn.commit()
    conn.close()
    q = sqlq.Queue(path, durability="normal")
    q.retention(max_count=10_000)
    t = time.perf_counter()
    for _ in range(0, n, 5000):
        q.put_many([BODY] * 5000)
    fill = time.perf_counter() - t
    q.backend.maintain()
    full = os.path.getsize(path)
    t = time.perf_counter()
    done: list[sqlq.Job] = []
    while jobs := q.reserve_many(500, timeout=0, delete=done):
        done = jobs
    drain = time.perf_counter() - t
    t = time.perf_counter()
    pruned = q.prune()
    prune = time.perf_counter() - t
    q.backend.maintain()
    print(f"sqlite auto_vacuum={mode} jobs={n}: fill {fill:.1f} s, drain {drain:.1f} s "
          f"({n / drain:,.0f}/s), file {full / 1e6:.1f} MB full; prune {prune:.1f} s {pruned}, "
          f"file then {os.path.getsize(path) / 1e6:.1f} MB")
    q.close()


def postgres_run(n: int) -> None:
    import psycopg

    from tests.pgserver import PgServer

    with PgServer() as server:
        if not server.running:
            server.start()
        server.create_database("bench")
        url = server.url_for("bench")
        q = sqlq.Queue(url, durability="normal")
        with psycopg.connect(url, autocommit=True) as c:
            c.execute(RECORDS.format(table="sqlq_finished"), (n,))
            c.execute("VACUUM ANALYZE sqlq_finished")
        q.retention(max_count=0)
        timed(url, "batched DELETE (q.prune, 500 a transaction)", q.prune)
        with psycopg.connect(url, autocommit=True) as c:
            c.execute("CREATE TABLE part (LIKE sqlq_finished) PARTITION BY RANGE (ended_at)")
            c.execute("CREATE TABLE part_old PARTITION OF part FOR VALUES FROM (0) "
                      "TO (1800000000000)")
            c.execute("CREATE TABLE part_new PARTITION OF part FOR VALUES FROM "
                      "(1800000000000) TO (MAXVALUE)")
            c.execute("CREATE INDEX ON part (tube, outcome, ended_at, id)")
            c.execute(RECORDS.format(table="part"), (n,))
            c.execute("VACUUM ANALYZE part")

            def drop() -> None:
                c.execute("ALTER TABLE part DETACH PARTITION part_old")
                c.execute("DROP TABLE part_old")

            timed(url, "DETACH + DROP of a partition", drop)
        q.close()


def timed(url: str, label: str, fn: Callable[[], Any]) -> None:
    """fn's time, and the puts a concurrent loop made meanwhile (median, longest)."""
    stop, took_each = threading.Event(), []

    def loop() -> None:
        with sqlq.Queue(url, durability="normal") as p:
            while not stop.is_set():
                t0 = time.perf_counter()
                p.put(b"x")
                took_each.append(time.perf_counter() - t0)

    thread = threading.Thread(target=loop)
    thread.start()
    time.sleep(0.5)
    before = len(took_each)
    t = time.perf_counter()
    out = fn()
    took = time.perf_counter() - t
    stop.set()
    thread.join()
    during = sorted(took_each[before:]) or [0.0]
    print(f"postgres {label}: {took:.2f} s {out or ''}; concurrent puts {len(during)}, "
          f"median {during[len(during) // 2] * 1000:.2f} ms, longest {during[-1] * 1000:.1f} ms")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("backend", choices=["sqlite", "postgres"])
    parser.add_argument("--jobs", type=int, default=1_000_000)
    parser.add_argument("--mode", default="none,incremental")
    args = parser.parse_args()
    if args.backend == "postgres":
        postgres_run(args.jobs)
        return
    directory = tempfile.mkdtemp(prefix="sqlq-retention-")
    try:
        for mode in args.mode.split(","):
            sqlite_run(args.jobs, mode, directory)
    finally:
        shutil.rmtree(directory)


if __name__ == "__main__":
    main()
