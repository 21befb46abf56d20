"""Big queues (issue 39): what put, claim and every read cost with a backlog of 10k, 1M and
10M jobs, on a SQLite file and on PostgreSQL, and how long a migration stalls a put loop.

    .venv/bin/python bench/bench_scale.py [--sizes 10000,1000000] [--backends sqlite,postgres]
        [--delayed 1.0] [--runs 15] [--work DIR] [--json FILE]
    .venv/bin/python bench/bench_scale.py --contention [--procs 4] [--seconds 5] [--tree DIR]
    .venv/bin/python bench/bench_scale.py --migration --sizes 1000000 --old-tree DIR

The store of size N holds N ready jobs in tube ``ready`` (priorities 100 and 1024, a
quarter urgent) and ``--delayed`` x N delayed jobs (an hour away) in tube ``later``. It
is filled through ``Queue.put_many`` in batches of 10,000 (the public bulk path: the
rows a put makes; on SQLite a batch that large runs with its triggers off and counts
once, queries.sql add_job_counts), and kept in ``--work`` (default bench/.work/scale/)
so the next run reuses it. Then, each figure the median of ``--runs`` (after one warm
call), in ms:

* put (one ``q.put``), claim (``reserve(timeout=0)`` + ``delete``), reserve_many (100 +
  ``delete_many``), stats, stats_tube, peek-ready, kick 1000 (of the delayed tube),
  ``sqlq top``'s read (``cli.top.take_sample``);
* the dashboard's overview (``/``), tube page (``/tube?name=ready``) and ``/metrics``,
  real HTTP to ``sqlq dashboard`` in its own process;
* bytes per job (the SQLite file and its WAL; PostgreSQL's sqlq_jobs with its indexes
  and TOAST), and the peak RSS of the dashboard process and of a worker process (a
  ``Queue`` that claims and deletes 500 jobs).

``--contention``: ``--procs`` processes each putting and claiming (put, reserve, delete)
for ``--seconds`` on one fresh PostgreSQL database; prints jobs/s (run it with ``--tree``
of a checkout without the counts for the before). ``--migration``: builds the store with
the sqlq of ``--old-tree`` (schema 1), starts a put loop with that sqlq, opens the store
with this one (which applies the new migrations) and prints the put loop's longest gap.

PostgreSQL is a throwaway server of the bench's own (``tests/pgserver.py``: fsync and
synchronous commit off: the statements, not the disk). The machine's load is printed:
on a shared machine compare ratios between sizes, not absolute times.
"""

from __future__ import annotations

import argparse
import contextlib
import http.client
import json
import os
import re
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
WORK = ROOT / "bench" / ".work" / "scale"
BATCH = 10_000


def _use_tree(tree: str | None) -> None:
    """Import sqlq from ``tree`` (another checkout), else from this one."""
    sys.path.insert(0, str(Path(tree).resolve() if tree else ROOT))


def _pg_server(work: Path) -> Any:
    from tests.pgserver import PgServer  # the standard library's only: no pytest

    return PgServer().start()


def _store(backend: str, size: int, work: Path, server: Any, tag: str = "") -> str:
    """The location of the store of ``size`` (``tag`` tells stores built by other trees
    apart), without creating it."""
    name = f"scale{tag}_{size}"
    if backend == "sqlite":
        return str(work / f"{name}.db")
    return str(server.url_for(name))


def _exists(backend: str, location: str, server: Any) -> bool:
    if backend == "sqlite":
        return os.path.exists(location)
    name = location.rsplit("/", 1)[1].split("?")[0]
    out = server.psql(f"SELECT 1 FROM pg_database WHERE datname = '{name}'", "postgres")
    return "1" in str(out)


def fill(backend: str, location: str, size: int, delayed: float, server: Any) -> float:
    """The store of ``size``: built if missing (returns seconds taken, 0 if reused)."""
    if _exists(backend, location, server):
        return 0.0
    if backend == "postgres":
        server.psql(f"CREATE DATABASE {location.rsplit('/', 1)[1]}", "postgres")
    started = time.monotonic()
    fill_rows(location, size, delayed)
    return time.monotonic() - started


def fill_rows(location: str, size: int, delayed: float) -> None:
    """``size`` ready jobs in tube ready, ``delayed`` x size delayed ones in tube later,
    through put_many; on PostgreSQL a VACUUM ANALYZE after (what autovacuum would do)."""
    import sqlq

    body = json.dumps({"task": "send", "to": "someone@example.com", "n": 0}).encode()
    with sqlq.Queue(location, durability="normal") as q:
        for tube, n, delay in (("ready", size, 0), ("later", int(size * delayed), 3600)):
            for at in range(0, n, BATCH):
                q.put_many([body] * min(BATCH, n - at), tube=tube, delay=delay,
                           priority=100 if (at // BATCH) % 4 == 0 else 1024)
    if location.startswith("postgresql"):
        import psycopg

        with psycopg.connect(location, autocommit=True) as conn:
            conn.execute("VACUUM ANALYZE sqlq_jobs")


def median_ms(call: Callable[[], object], runs: int) -> float:
    call()  # warm: statements prepared, pages cached
    times = []
    for _ in range(runs):
        t = time.perf_counter()
        call()
        times.append((time.perf_counter() - t) * 1000)
    return statistics.median(times)


def size_per_job(backend: str, location: str, jobs: int) -> float:
    if backend == "sqlite":
        total = sum(os.path.getsize(location + s) for s in ("", "-wal")
                    if os.path.exists(location + s))
        return total / jobs
    import psycopg

    with psycopg.connect(location) as conn:
        row = conn.execute("SELECT pg_total_relation_size('sqlq_jobs')").fetchone()
    assert row is not None
    return int(row[0]) / jobs


@contextlib.contextmanager
def dashboard(location: str) -> Iterator[tuple[http.client.HTTPConnection, int]]:
    proc = subprocess.Popen([sys.executable, "-m", "sqlq", "--db", location, "dashboard",
                             "--listen", "127.0.0.1:0"], stderr=subprocess.PIPE, text=True,
                            env=dict(os.environ, PYTHONPATH=sys.path[0]))
    assert proc.stderr is not None
    found = re.search(r"http://([\d.]+):(\d+)/", proc.stderr.readline())
    assert found, "the dashboard did not start"
    conn = http.client.HTTPConnection(found.group(1), int(found.group(2)), timeout=300)
    try:
        yield conn, proc.pid
    finally:
        conn.close()
        proc.terminate()
        proc.wait(30)


def get(conn: http.client.HTTPConnection, path: str) -> None:
    conn.request("GET", path)
    resp = conn.getresponse()
    resp.read()
    assert resp.status == 200, (path, resp.status)


def peak_rss_mib(pid: int | str = "self") -> float:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return 0.0


WORKER = """
import sys, sqlq
with sqlq.Queue(sys.argv[1], durability="normal") as q:
    for _ in range(500):
        job = q.reserve("ready", timeout=0)
        job.delete()
    with open("/proc/self/status") as f:
        print(next(int(l.split()[1]) for l in f if l.startswith("VmHWM:")) / 1024)
"""


def measure(backend: str, location: str, size: int, runs: int) -> dict[str, float]:
    import sqlq
    from sqlq.cli.top import take_sample

    r: dict[str, float] = {}
    with sqlq.Queue(location, durability="normal") as q:
        r["put"] = median_ms(lambda: q.put(b"{}", tube="ready"), runs * 10)

        def claim() -> None:
            job = q.reserve("ready", timeout=0)
            assert job is not None
            job.delete()

        r["claim"] = median_ms(claim, runs * 10)

        def many() -> None:
            q.delete_many(q.reserve_many(100, "ready", timeout=0))

        r["reserve_many(100)"] = median_ms(many, runs)
        r["stats"] = median_ms(q.stats, runs)
        r["stats_tube"] = median_ms(lambda: q.stats_tube("ready"), runs)
        r["peek-ready"] = median_ms(lambda: q.peek_ready("ready"), runs)
        r["kick 1000"] = median_ms(lambda: q.kick(1000, "later"), 3)
        r["top read"] = median_ms(lambda: take_sample(q), runs)
    with dashboard(location) as (conn, pid):
        r["overview page"] = median_ms(lambda: get(conn, "/"), runs)
        r["tube page"] = median_ms(lambda: get(conn, "/tube?name=ready"), runs)
        r["/metrics"] = median_ms(lambda: get(conn, "/metrics"), runs)
        r["dashboard RSS MiB"] = peak_rss_mib(pid)
    out = subprocess.run([sys.executable, "-c", WORKER, location], capture_output=True,
                         text=True, check=True, env=dict(os.environ, PYTHONPATH=sys.path[0]))
    r["worker RSS MiB"] = float(out.stdout.split()[-1])
    return r


def load() -> str:
    return " ".join(f"{x:.1f}" for x in os.getloadavg())


def run_sizes(args: argparse.Namespace) -> int:
    _use_tree(None)  # tests.pgserver
    if args.tree:
        _use_tree(args.tree)  # sqlq from there (the before)
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    server = _pg_server(work) if "postgres" in args.backends else None
    results: dict[str, dict[str, dict[str, float]]] = {}
    try:
        for backend in args.backends:
            for size in args.sizes:
                location = _store(backend, size, work, server)
                built = fill(backend, location, size, args.delayed, server)
                jobs = size + int(size * args.delayed)
                per_job = size_per_job(backend, location, jobs)
                how = f"built in {built:.0f} s" if built else "reused"
                print(f"{backend} {size:,}: {how}, {per_job:.0f} bytes a job, load {load()}",
                      flush=True)
                r = measure(backend, location, size, args.runs)
                r["bytes a job"] = per_job
                if built:
                    r["fill jobs/s"] = jobs / built
                results.setdefault(backend, {})[f"{size}"] = r
                print(json.dumps(r), flush=True)
    finally:
        if server is not None:
            server.stop()
    table(results, args.sizes)
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))
    return 0


def table(results: dict[str, dict[str, dict[str, float]]], sizes: list[int]) -> None:
    rows = list(next(iter(next(iter(results.values())).values())))
    for backend, by_size in results.items():
        heads = [f"{s:,}" for s in sizes if f"{s}" in by_size]
        print(f"\n{backend} (ms unless named)\n\n| | {' | '.join(heads)} |\n"
              f"|---|{'---:|' * len(heads)}")
        for row in rows:
            cells = [by_size[f"{s}"].get(row) for s in sizes if f"{s}" in by_size]
            print(f"| {row} | " + " | ".join("" if c is None else (f"{c:,.0f}" if c >= 100
                                                                    else f"{c:.2f}")
                                              for c in cells) + " |")


CONTENDER = """
import sys, time, sqlq
url, seconds = sys.argv[1], float(sys.argv[2])
n = 0
with sqlq.Queue(url, durability="normal") as q:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        q.put(b"x", tube="t")
        job = q.reserve("t", timeout=0)
        if job is not None:
            job.delete()
        n += 1
print(n)
"""


def run_contention(args: argparse.Namespace) -> int:
    _use_tree(None)  # tests.pgserver
    if args.tree:
        _use_tree(args.tree)
    import sqlq

    server = _pg_server(Path(args.work))
    try:
        server.psql("CREATE DATABASE contention", "postgres")
        url = str(server.url_for("contention"))
        sqlq.Queue(url).close()  # migrated before the clock starts
        env = dict(os.environ, PYTHONPATH=sys.path[0])
        procs = [subprocess.Popen([sys.executable, "-c", CONTENDER, url, str(args.seconds)],
                                  stdout=subprocess.PIPE, text=True, env=env)
                 for _ in range(args.procs)]
        done = [int(p.communicate()[0]) for p in procs]
        print(f"{args.procs} processes x {args.seconds:g} s of put+reserve+delete on "
              f"PostgreSQL ({args.tree or 'this tree'}): {sum(done) / args.seconds:,.0f} "
              f"jobs/s ({done}), load {load()}")
    finally:
        server.stop()
    return 0


PUT_LOOP = """
import sys, time, sqlq
url, stop = sys.argv[1], sys.argv[2]
import os
gaps, last, n = [], time.monotonic(), 0
with sqlq.Queue(url, durability="normal") as q:
    print("ready", flush=True)
    while not os.path.exists(stop):
        q.put(b"x", tube="ready")
        job = q.reserve("ready", timeout=0)
        if job is not None:
            job.delete()
        now = time.monotonic()
        gaps.append(now - last)
        last, n = now, n + 1
print(f"{max(gaps) * 1000:.0f} {sorted(gaps)[len(gaps) // 2] * 1000:.2f} {n}")
"""


def run_migration(args: argparse.Namespace) -> int:
    """For each size: a store made by --old-tree, its put+claim loop run by that sqlq,
    and this sqlq opening it meanwhile (the migrations): the loop's longest gap."""
    _use_tree(None)
    old = str(Path(args.old_tree).resolve())
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    server = _pg_server(work) if "postgres" in args.backends else None
    try:
        for backend in args.backends:
            for size in args.sizes:
                location = _store(backend, size, work, server, tag="old")
                if _exists(backend, location, server):
                    raise SystemExit(f"{location} exists: --migration needs a new store")
                env_old = dict(os.environ, PYTHONPATH=old)
                code = ("import sys; sys.path.insert(0, sys.argv[1]); import bench_scale as b;"
                        "b.fill_rows(sys.argv[2], int(sys.argv[3]), float(sys.argv[4]))")
                started = time.monotonic()
                if backend == "postgres":
                    server.psql(f"CREATE DATABASE {location.rsplit('/', 1)[1]}", "postgres")
                subprocess.run([sys.executable, "-c", code, str(ROOT / "bench"), location,
                                str(size), str(args.delayed)],
                               env=env_old, check=True)
                built = time.monotonic() - started
                stop = work / "stop"
                stop.unlink(missing_ok=True)
                loop = subprocess.Popen([sys.executable, "-c", PUT_LOOP, location, str(stop)],
                                        stdout=subprocess.PIPE, text=True, env=env_old)
                assert loop.stdout is not None
                assert loop.stdout.readline().strip() == "ready"
                time.sleep(2)
                t = time.monotonic()
                subprocess.run([sys.executable, "-c", "import sys, sqlq; sqlq.Queue(sys.argv[1])"
                                ".close()", location], check=True,
                               env=dict(os.environ, PYTHONPATH=str(ROOT)))
                migrated = time.monotonic() - t
                time.sleep(2)
                stop.touch()
                worst, median, n = loop.communicate(timeout=120)[0].split()
                print(f"{backend} {size:,} (built by the old tree in {built:.0f} s): the "
                      f"migration took {migrated * 1000:.0f} ms (a process's open, with "
                      f"its imports); the put+claim loop's longest gap {worst} ms (median "
                      f"{median} ms, {n} loops), load {load()}", flush=True)
    finally:
        if server is not None:
            server.stop()
    return 0


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sizes", default="10000,1000000,10000000")
    p.add_argument("--backends", default="sqlite,postgres")
    p.add_argument("--delayed", type=float, default=1.0,
                   help="delayed jobs in tube 'later', as a fraction of the size")
    p.add_argument("--runs", type=int, default=15)
    p.add_argument("--work", default=str(WORK))
    p.add_argument("--json", default="")
    p.add_argument("--contention", action="store_true")
    p.add_argument("--procs", type=int, default=4)
    p.add_argument("--seconds", type=float, default=5)
    p.add_argument("--tree", default=None)
    p.add_argument("--migration", action="store_true")
    p.add_argument("--old-tree", default=None)
    args = p.parse_args()
    args.sizes = [int(s) for s in args.sizes.split(",")]
    args.backends = args.backends.split(",")
    if args.contention:
        return run_contention(args)
    if args.migration:
        if not args.old_tree:
            p.error("--migration needs --old-tree")
        return run_migration(args)
    return run_sizes(args)


if __name__ == "__main__":
    sys.exit(main())
