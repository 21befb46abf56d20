"""What binding through ``(SELECT :x)`` saves once a file has ``sqlite_stat4``.

    .venv/bin/python bench/bench_reprepare.py [--runs 7] [NAME ...]

SQLite built with STAT4 (apsw's is) prepares a statement again on every run when its
planner reads a bound value: a tube or a time compared with an indexed column, once
``ANALYZE`` has written samples, or a LIMIT (queries.sql's header). For each named
statement of the SQLite backend this times, on one analyzed file and interleaved run
by run, A: the statement with every ``(SELECT :x)`` written as a bare ``:x`` (as it
was before), and B: as it is in queries.sql; then prints the median A/B and its
range. ``--wrap NAME`` times the other way round (A: as shipped, B: ``:tube``,
``:now``, ``:limit`` and ``:bound`` wrapped), for statements left bare.
"""

from __future__ import annotations

import argparse
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import sqlq  # noqa: E402
from sqlq.backends.sqlite.store import SQLiteStore  # noqa: E402

SHIPPED = ("peek_ready_id", "peek_delayed_id", "peek_buried_id", "kick_buried",
           "list_ready_jobs", "tube_counts")
VALUES = {"tube": "a", "tubes": '["a"]', "now": 1, "bound": 0, "limit": 10, "key": 0,
          "after": 0, "min_id": 0, "bytes": b"x", "text": "x", "owner": "o", "id": 1,
          "topic": "t"}
WRAPPED = ("tube", "now", "limit", "bound")


def bare(sql: str) -> str:
    return re.sub(r"\(SELECT :(\w+)\)", r":\1", sql)


def wrap(sql: str) -> str:
    names = "|".join(WRAPPED)
    return re.sub(rf"(?<![\w:])(?<!SELECT ):({names})\b", r"(SELECT :\1)", sql)


def per_run_us(conn: object, sql: str, n: int = 3000) -> float:
    params = {p: VALUES[p] for p in re.findall(r":(\w+)", sql)}
    run = conn.execute  # type: ignore[attr-defined]
    for _ in range(50):
        run(sql, params).fetchall()
    start = time.perf_counter()
    for _ in range(n):
        run(sql, params).fetchall()
    return (time.perf_counter() - start) / n * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--wrap", action="store_true",
                        help="A: as shipped, B: wrapped (for statements left bare)")
    parser.add_argument("names", nargs="*", default=list(SHIPPED))
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp, sqlq.Queue(f"{tmp}/q.db") as q:
        q.put_many([b"x"] * 2000, tube="a")
        q.put_many([b"y"] * 500, tube="a", delay=100)
        q.put_many([b"x"] * 2000, tube="b")
        conn = q.backend.db.conn  # type: ignore[attr-defined]
        conn.execute("ANALYZE")
        for name in args.names:
            shipped = SQLiteStore.Q[name]
            a_sql, b_sql = (shipped, wrap(shipped)) if args.wrap else (bare(shipped), shipped)
            a_us, b_us, ratios = [], [], []
            for _ in range(args.runs):
                conn.execute("BEGIN")  # kicks write: rolled back after each pair
                try:
                    a, b = per_run_us(conn, a_sql), per_run_us(conn, b_sql)
                finally:
                    conn.execute("ROLLBACK")
                a_us.append(a)
                b_us.append(b)
                ratios.append(a / b)
            print(f"{name:16} A {statistics.median(a_us):6.1f} us  B "
                  f"{statistics.median(b_us):5.1f} us  A/B {statistics.median(ratios):.2f} "
                  f"({min(ratios):.2f}-{max(ratios):.2f})")


if __name__ == "__main__":
    main()
