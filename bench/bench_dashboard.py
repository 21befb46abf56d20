"""Dashboard latency on a file of a million jobs: the overview (target < 200 ms) and a tube
page (target < 300 ms), reported, not asserted.

    .venv/bin/python bench/bench_dashboard.py [--jobs 1000000] [--runs 20] [--db PATH]

Builds the file once (``--db`` keeps it for the next run; about a minute), starts the
real ``sqlq dashboard`` in its own process and times whole HTTP requests from this
one (connect, render, transfer), one after another on a keep-alive connection: the
first request of each page is reported apart (cold page cache), then the median,
p95 and worst of the rest. The mix: one large tube (70% of the jobs), a second with
delayed jobs, a third with buried and reserved ones, and a few small tubes.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import sqlq  # noqa: E402

BATCH = 20_000


def build(path: str, jobs: int) -> None:
    """The million-job file: emails 70%, thumbs 20% (a fifth delayed), reports 9.5%
    (a tenth buried, 1,000 reserved), the rest over five small tubes."""
    q = sqlq.Queue(path, durability="normal")
    plan = [("emails", int(jobs * 0.70), 0), ("thumbs", int(jobs * 0.16), 0),
            ("thumbs", int(jobs * 0.04), 3600), ("reports", int(jobs * 0.095), 0)]
    rest = jobs - sum(n for _, n, _ in plan)
    plan += [(f"small-{i}", rest // 5 + (1 if i < rest % 5 else 0), 0) for i in range(5)]
    started = time.monotonic()
    for tube, n, delay in plan:
        for at in range(0, n, BATCH):
            bodies = [json.dumps({"task": tube, "n": at + i, "to": f"user{at + i}@example.com"})
                      for i in range(min(BATCH, n - at))]
            q.put_many(bodies, tube=tube, delay=delay, priority=1024 if (at // BATCH) % 4 else 100)
    buried = int(jobs * 0.0095)
    for _ in range(buried):
        job = q.reserve("reports", timeout=0, detach=True)
        assert job is not None
        job.bury(reason="ValueError: bench")
    for _ in range(1000):
        q.reserve("reports", timeout=0, detach=True)
    print(f"built {jobs:,} jobs in {time.monotonic() - started:.0f} s: {path} "
          f"({os.path.getsize(path) / 2**20:.0f} MiB)", flush=True)
    q.close()


def start(db: str) -> tuple[subprocess.Popen[str], str, int]:
    proc = subprocess.Popen([sys.executable, "-m", "sqlq", "--db", db, "dashboard", "--listen",
                             "127.0.0.1:0"], stderr=subprocess.PIPE, text=True,
                            env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert proc.stderr is not None
    found = re.search(r"http://([\d.]+):(\d+)/", proc.stderr.readline())
    assert found, "the dashboard did not start"
    return proc, found.group(1), int(found.group(2))


def timed(conn: http.client.HTTPConnection, path: str) -> tuple[float, int, bytes]:
    t = time.perf_counter()
    conn.request("GET", path)
    resp = conn.getresponse()
    body = resp.read()
    return (time.perf_counter() - t) * 1000, resp.status, body


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--jobs", type=int, default=1_000_000)
    p.add_argument("--runs", type=int, default=20)
    p.add_argument("--db", default="", help="keep the file here (built if missing)")
    args = p.parse_args()
    db = args.db or str(Path(tempfile.mkdtemp(prefix="sqlq-dash-")) / "million.db")
    if not os.path.exists(db):
        build(db, args.jobs)
    with sqlq.Queue(db) as q:
        total = q.views.overview().live
        middle = q.views.job_page("emails", "ready", limit=1)[0].id + total // 3
        deep = q.peek(middle)
        cursor = f"{deep.priority}:{deep.id}" if deep else ""
    proc, host, port = start(db)
    pages = [
        ("overview", "/"),
        ("overview poll (JSON)", "/api/overview"),
        ("tube page, ready, page 1 (700k-job tube)", "/tube?name=emails"),
        ("tube page, ready, deep page", f"/tube?name=emails&after={cursor}"),
        ("tube page, delayed", "/tube?name=thumbs&state=delayed"),
        ("tube page, buried", "/tube?name=reports&state=buried"),
        ("tube page, reserved", "/tube?name=reports&state=reserved"),
        ("tube page, search (body text)", "/tube?name=emails&q=user999999%40"),
        ("job page", f"/job?id={middle}"),
        ("/metrics", "/metrics"),
    ]
    try:
        conn = http.client.HTTPConnection(host, port, timeout=60)
        print(f"\n{total:,} live jobs; {args.runs} requests per page after a first (cold) one\n")
        print("| page | first ms | median ms | p95 ms | max ms |\n|---|---:|---:|---:|---:|")
        for name, path in pages:
            first, status, _ = timed(conn, path)
            assert status == 200, (path, status)
            times = sorted(timed(conn, path)[0] for _ in range(args.runs))
            p95 = times[min(len(times) - 1, int(len(times) * 0.95))]
            print(f"| {name} | {first:.0f} | {statistics.median(times):.0f} | {p95:.0f} "
                  f"| {times[-1]:.0f} |", flush=True)
        conn.close()
    finally:
        proc.terminate()
        proc.wait(30)
    return 0


if __name__ == "__main__":
    sys.exit(main())
