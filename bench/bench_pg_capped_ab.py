"""What PostgreSQL migration 0016 (a capped job's delete notifies) costs a tube WITHOUT
limits: the worker's hot statements as they were before it and as they are, A/B in one
database, interleaved statement by statement on one session.

    .venv/bin/python bench/bench_pg_capped_ab.py [--jobs 500] [--rounds 41] [--aa]

Before: the delete-and-claim functions of migration 0011 (created here under other
names) and ``delete_leased_job`` without its ``CASE WHEN capped`` column; after: this
checkout's. Three loops over an uncapped tube: ``acks`` (claim, then
``delete_leased_job``), ``fast`` (``sqlq_delete_and_claim``: the worker's one commit a
job) and ``batch`` (``sqlq_delete_and_claim_many``, 10 a call). The figure is the
backend's own CPU time (``/proc/<pid>/schedstat``: the scheduler's account, in ns), so
the client and the machine's other load fall out; the variants alternate every cycle,
so drift hits both. Reported: each variant's median µs a job over the rounds, and the
median and quartiles of after/before per round. ``--aa`` runs "before" against itself
under the two names: the harness's own bias (about 0.5 %, from which side runs
second), the floor any A/B difference must clear. A throwaway server from
``tests/pgserver.py`` (fsync and synchronous commit off: the statements, not the disk).
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import psycopg  # noqa: E402

import sqlq  # noqa: E402
from sqlq.backends.sql import load_queries  # noqa: E402

Q = load_queries(ROOT / "sqlq" / "backends" / "postgres" / "queries.sql")
#: The last commit with the pre-release migrations (squashed into 0001 before 0.1.0).
PRE_SQUASH = "7b657db"
#: delete_leased_job before migration 0016.
OLD_DELETE = """DELETE FROM sqlq_jobs
 WHERE id = %s AND state = 2 AND lease = %s AND reserved_until > %s AND dependents = 0
RETURNING tube"""
NOW = 1_700_000_000_000
KINDS = ("acks", "fast", "batch")


def old_functions(conn: Any) -> None:
    """Migration 0011's delete-and-claim functions, as sqlq_..._old."""
    import subprocess

    text = subprocess.run(
        ["git", "show", f"{PRE_SQUASH}:sqlq/backends/postgres/migrations/0011_dependencies.sql"],
        cwd=ROOT, capture_output=True, text=True, check=True).stdout
    one = text[text.index("CREATE OR REPLACE FUNCTION sqlq_delete_and_claim(p_id"):
               text.index("-- Schema 5's function")]
    many = text[text.index("CREATE OR REPLACE FUNCTION sqlq_delete_and_claim_many("):]
    conn.execute(one.replace("sqlq_delete_and_claim(", "sqlq_delete_and_claim_old("))
    conn.execute(many.replace("sqlq_delete_and_claim_many(", "sqlq_delete_and_claim_many_old("))


def variants(aa: bool) -> dict[str, dict[str, str]]:
    before = {"delete": OLD_DELETE,
              "fast": Q["delete_and_claim"].replace("sqlq_delete_and_claim(",
                                                    "sqlq_delete_and_claim_old("),
              "batch": Q["delete_and_claim_jobs"].replace("sqlq_delete_and_claim_many(",
                                                          "sqlq_delete_and_claim_many_old(")}
    after = {"delete": Q["delete_leased_job"], "fast": Q["delete_and_claim"],
             "batch": Q["delete_and_claim_jobs"]}
    return {"before": before, "after": dict(before) if aa else after}


def run(url: str, jobs: int, rounds: int, aa: bool) -> dict[tuple[str, str], list[int]]:
    sqlq.Queue(url).close()  # this checkout's schema
    conn = psycopg.connect(url, autocommit=True)
    old_functions(conn)
    sides = variants(aa)
    pid = conn.execute("SELECT pg_backend_pid()").fetchone()[0]  # type: ignore[index]

    def cpu() -> int:
        with open(f"/proc/{pid}/schedstat") as f:
            return int(f.read().split()[0])

    def fill(n: int) -> None:
        conn.execute(Q["insert_jobs"], {"tube": "t", "priority": 1024, "state": 0, "delay": 0,
                                        "delay_until": None, "ttr": 60000, "now": NOW,
                                        "bodies": [b"x" * 64] * n}).fetchall()

    claim = {"tubes": ["t"], "now": NOW, "owner": "o", "capped": False}

    def many(side: str, rows: list[Any], n: int) -> list[Any]:
        return conn.execute(sides[side]["batch"], {
            "ids": [r[0] for r in rows], "leases": [r[11] for r in rows], "now": NOW,
            "tubes": ["t"], "owner": "o", "n": n}).fetchall()

    results: dict[tuple[str, str], list[int]] = {(s, k): [] for s in sides for k in KINDS}
    for _ in range(rounds):
        spent = {key: 0 for key in results}
        fill(4 * jobs + 10)
        held = {side: conn.execute(Q["claim_job"], claim).fetchone() for side in sides}
        for i in range(jobs):
            for side in (("before", "after") if i % 2 == 0 else ("after", "before")):
                start = cpu()
                row = conn.execute(Q["claim_job"], claim).fetchone()
                conn.execute(sides[side]["delete"], (row[0], row[11], NOW)).fetchone()
                spent[(side, "acks")] += cpu() - start
                start = cpu()
                held[side] = conn.execute(sides[side]["fast"], {
                    "id": held[side][0], "lease": held[side][11], "now": NOW,
                    "tubes": ["t"], "owner": "o"}).fetchone()
                spent[(side, "fast")] += cpu() - start
        fill(2 * jobs + 20)
        batches = {side: conn.execute(Q["claim_jobs"], dict(claim, n=10)).fetchall()
                   for side in sides}
        for i in range(jobs // 10):
            for side in (("before", "after") if i % 2 == 0 else ("after", "before")):
                start = cpu()
                batches[side] = many(side, batches[side], 10)
                spent[(side, "batch")] += cpu() - start
        conn.execute("DELETE FROM sqlq_jobs")
        conn.execute("VACUUM sqlq_jobs")
        for key, ns in spent.items():
            results[key].append(ns)
    conn.close()
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=500)
    parser.add_argument("--rounds", type=int, default=41)
    parser.add_argument("--aa", action="store_true", help="before against itself")
    args = parser.parse_args()
    from tests.pgserver import PgServer  # the standard library's only: no pytest

    server = PgServer().start()
    try:
        server.psql("CREATE DATABASE ab", "postgres")
        results = run(str(server.url_for("ab")), args.jobs, args.rounds, args.aa)
    finally:
        server.close()
    label = "A/A (before against itself)" if args.aa else "before/after migration 0016"
    print(f"PostgreSQL {label}, {args.jobs} jobs x {args.rounds} rounds, backend CPU")
    for kind in KINDS:
        before, after = results[("before", kind)], results[("after", kind)]
        ratios = sorted(b / a for a, b in zip(before, after, strict=True))
        print(f"{kind:5}  before {statistics.median(before) / args.jobs / 1e3:6.1f} us/job"
              f"  after {statistics.median(after) / args.jobs / 1e3:6.1f} us/job"
              f"  after/before per round: median {statistics.median(ratios):.3f},"
              f" quartiles {ratios[len(ratios) // 4]:.3f}-{ratios[3 * len(ratios) // 4]:.3f}")


if __name__ == "__main__":
    main()
