"""Issue 28's rows: a drain one job at a time while another session holds a snapshot.

    python bench/horizon.py [--sizes 20000 | --full] [--backends sqlite,postgres]
                            [--holders none,snapshot,idle-xid] [--loops fast,delete]
                            [--runs 1] [--sqlq TREE [--sqlq TREE2]] [--json FILE]
    python bench/horizon.py --sizes 5000            # a quick look while iterating

Any Python with apsw (and psycopg for PostgreSQL) runs it: the project's .venv or
.venv-bench. ``bench/run.py --workloads horizon`` (part of ``make bench``) runs it too.

Each row: N jobs put (put_many in batches, not timed), then drained one at a time
until none is left, timed by tenths. The *holder* is another session, opened after the
schema exists and **before the puts**, that stays open for the whole drain:

* ``none``: no other session (the reference).
* ``snapshot``: PostgreSQL ``BEGIN ISOLATION LEVEL REPEATABLE READ; SELECT count(*) FROM
  sqlq_jobs`` (a report, a ``pg_dump``); SQLite a second connection in ``BEGIN; SELECT
  count(*) FROM sqlq_jobs`` (an open ``sqlite3`` shell, a backup reading the file).
* ``idle-xid`` (PostgreSQL only): a session that wrote a row (so it has a transaction id)
  and sits idle in transaction; READ COMMITTED, so it holds the horizon by its xid, not
  by a snapshot.

The loops, both through sqlq's public API:

* ``delete``: ``q.reserve([tube], timeout=0)`` then ``job.delete()``: two commits a job,
  what a client does that deletes when it is done.
* ``fast``: ``q.reserve([tube], timeout=0, delete=prev)``: the worker's fast path
  (``sqlq work``, ``JobHandling``), the previous job's delete and the next claim in one
  transaction (on PostgreSQL one statement, ``sqlq_delete_and_claim``, on main).

Reported per (tree, backend, N, holder, loop): the rate of the first and of the last
tenth of the drain (jobs/s), last/first (issue 28's goal: >= 0.8 under a held snapshot),
the overall rate, and the state that explains it: on SQLite the -wal's size at the end
of the drain and its peak (sampled every hundredth); on PostgreSQL, still under the
holder: the index entries the run's scans read, per job and per index of the sqlq_*
tables (``idx_tup_read``: a claim that walks dead entries reads n/2 of them a job on
average), ``n_dead_tup`` of sqlq_jobs, the size of the ready index (``sqlq_jobs_ready``:
every index of sqlq_jobs whose name says "ready"), of all of sqlq_jobs' indexes and of
the sqlq_* relations; then a ``VACUUM`` of the sqlq_* tables and the dead rows it had
to keep.
Between the fill and the drain a PostgreSQL database gets ``VACUUM ANALYZE`` (what
autovacuum gives a queue in its steady state), so that the first tenth does not pay
for autovacuum's first pass, and the plans are those of a table with statistics.
Durability ``normal`` by default (no fsync per commit: the rows show the claim's cost,
not the disk's).

Each drain runs in a child process (``python bench/horizon.py --child``) with
``PYTHONPATH`` set to the tree under test, so ``--sqlq /path/to/main --sqlq .`` compares
two checkouts in one run, turn and turn about (tree is the innermost loop). The holder
and the PostgreSQL server (``tests/pgserver.py``, durable settings, a fresh database per
row) belong to this process and do not depend on the tree.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import json
import os
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
TUBE = "bench"
FILL = 5000  # jobs per put_many while filling
CHILD_TIMEOUT = 3600.0
FILLED = "filled"  # the child's line between the fill and the drain
TENTH = "tenth"  # the child's line after each tenth of the drain: its number, its rate
HOLDERS = ["none", "snapshot", "idle-xid"]
LOOPS = {"delete": "reserve(timeout=0) + job.delete()",
         "fast": "reserve(timeout=0, delete=prev)"}
BACKENDS = ["sqlite", "postgres"]
PROGRESS_FROM = 50_000  # standalone, drains this long say how far they are (PostgreSQL
# under a snapshot: half an hour for 100,000)
Log = Callable[[str], None]


# ------------------------------------------------------------ the child: one tree's sqlq


def _body(i: int) -> bytes:
    return b"%010d" % i + b"." * 90  # 100 bytes, as the other drains' jobs


def _size(path: Path | None) -> int:
    try:
        return path.stat().st_size if path is not None else 0
    except FileNotFoundError:
        return 0


def _drain(q: Any, n: int, loop: str, wal: Path | None) -> dict[str, Any]:
    """Claim and delete the n jobs one at a time: a time mark after each tenth, the
    -wal's size sampled every hundredth (SQLite)."""
    tenth, hundredth = max(1, n // 10), max(1, n // 100)
    marks = [time.perf_counter()]
    hundredths = [(0, marks[0])]  # (jobs done, time) after each hundredth
    peak = _size(wal)
    job = None
    fast = loop == "fast"
    for done in range(1, n + 1):
        job = q.reserve([TUBE], timeout=0, delete=job) if fast else q.reserve([TUBE], timeout=0)
        if job is None:
            raise RuntimeError(f"the queue ran dry after {done - 1} of {n} jobs")
        if not fast:
            job.delete()
        if done % tenth == 0:
            marks.append(time.perf_counter())
            print(f"{TENTH} {len(marks) - 1} {tenth / (marks[-1] - marks[-2]):.0f}", flush=True)
        if done % hundredth == 0:
            hundredths.append((done, time.perf_counter()))
            if wal is not None:
                peak = max(peak, _size(wal))
    if fast and job is not None:
        job.delete()  # the last one: no next claim to carry it
    if q.reserve([TUBE], timeout=0) is not None:
        raise RuntimeError(f"jobs left after draining {n}")
    end = _size(wal)
    return {"marks": marks, "hundredths": hundredths, "wal_peak": max(peak, end),
            "wal_end": end}


def child_main(spec: dict[str, Any]) -> dict[str, Any]:
    """One stage in the tree's sqlq: ``init`` creates the schema; ``drain`` fills and
    drains. The answer is one JSON line on stdout."""
    import sqlq

    where = spec["where"]
    q = sqlq.Queue(where, durability=spec["durability"])
    try:
        out: dict[str, Any] = {"sqlq": str(Path(sqlq.__file__).parent)}
        if spec["stage"] == "init":
            return out
        n = int(spec["n"])
        t0 = time.perf_counter()
        for lo in range(0, n, FILL):
            q.put_many([_body(i) for i in range(lo, min(lo + FILL, n))], tube=TUBE)
        out["fill_s"] = time.perf_counter() - t0
        print(FILLED, flush=True)  # the parent settles the database, then says go
        if sys.stdin.readline().strip() != "go":
            raise RuntimeError("the parent did not say go")
        wal = None if "://" in where else Path(where + "-wal")
        out.update(_drain(q, n, spec["loop"], wal))
        return out
    finally:
        q.close()


# ------------------------------------------------------------ trees


@dataclass
class Tree:
    """A checkout whose sqlq the children import (None: whatever this process's
    environment gives, e.g. run.py's snapshot on PYTHONPATH)."""

    path: Path | None
    label: str

    @classmethod
    def of(cls, path: str) -> Tree:
        p = Path(path).resolve()
        if not (p / "sqlq" / "__init__.py").is_file():
            raise SystemExit(f"--sqlq {path}: no sqlq/__init__.py there")

        def git(*a: str) -> str:
            r = subprocess.run(["git", "-C", str(p), *a], capture_output=True, text=True)
            return r.stdout.strip() if r.returncode == 0 else ""

        commit = git("rev-parse", "--short", "HEAD")
        dirty = "+dirty" if git("status", "--porcelain", "--", "sqlq") else ""
        return cls(p, f"{p.name}@{commit}{dirty}" if commit else p.name)

    def run(self, spec: dict[str, Any], between: Callable[[], None] | None = None,
            progress: Log | None = None) -> dict[str, Any]:
        """One stage in a child on this tree's sqlq; ``between`` runs once the child has
        filled the queue, before it drains; ``progress`` gets a line after each tenth."""
        env = dict(os.environ)
        if self.path is not None:
            env["PYTHONPATH"] = os.pathsep.join(
                x for x in (str(self.path), env.get("PYTHONPATH", "")) if x)
        with tempfile.TemporaryFile("w+") as err, subprocess.Popen(
                [sys.executable, str(Path(__file__).resolve()), "--child", json.dumps(spec)],
                env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err,
                text=True) as proc:
            assert proc.stdin is not None and proc.stdout is not None
            try:
                lines = []
                if spec["stage"] == "drain":
                    for line in proc.stdout:  # until the child has filled the queue
                        if line.strip() == FILLED:
                            if between is not None:
                                between()
                            proc.stdin.write("go\n")
                            proc.stdin.flush()
                            break
                        lines.append(line)
                for line in proc.stdout:
                    if line.startswith(TENTH):
                        _, k, rate = line.split()
                        if progress is not None:
                            progress(f"    tenth {k}/10: {int(rate):,} jobs/s")
                    else:
                        lines.append(line)
                proc.wait(CHILD_TIMEOUT)
                out = "".join(lines)
            except BaseException:
                proc.kill()
                raise
            if proc.returncode != 0:
                err.seek(0)
                tail = "\n".join(err.read().strip().splitlines()[-8:])
                raise RuntimeError(f"child ({self.label}, {spec['stage']}) failed:\n{tail}")
        answer: dict[str, Any] = json.loads(out.strip().splitlines()[-1])
        return answer


# ------------------------------------------------------------ backends: place, holder, state


class SqliteSide:
    """A fresh file per row; the holder is a second connection (Python's sqlite3, as an
    open ``sqlite3`` shell would be) reading in a transaction."""

    name = "sqlite"

    def unavailable(self) -> str | None:
        return None

    @contextlib.contextmanager
    def place(self) -> Iterator[str]:
        d = Path(tempfile.mkdtemp(prefix="sqlq-bench-horizon-"))
        try:
            yield str(d / "horizon.db")
        finally:
            shutil.rmtree(d, ignore_errors=True)

    @contextlib.contextmanager
    def holder(self, where: str, kind: str) -> Iterator[None]:
        if kind == "none":
            yield
            return
        if kind != "snapshot":
            raise ValueError(f"holder {kind!r} is PostgreSQL's only")
        conn = sqlite3.connect(where, isolation_level=None)
        try:
            conn.execute("BEGIN")
            conn.execute("SELECT count(*) FROM sqlq_jobs").fetchone()
            yield
        finally:
            conn.close()

    def settle(self, where: str) -> None:
        """Nothing between the fill and the drain: sqlq keeps its file's statistics."""

    def state(self, where: str, child: dict[str, Any]) -> dict[str, Any]:
        return {"wal_end": child["wal_end"], "wal_peak": child["wal_peak"],
                "db": _size(Path(where))}

    def stop(self) -> None:
        pass


PG_STATE = {
    # dead row versions made since the last (auto)vacuum: as many with a holder as without
    "dead": "SELECT coalesce(sum(n_dead_tup), 0) FROM pg_stat_user_tables"
            " WHERE relname = 'sqlq_jobs'",
    # index entries the scans of the drain read (dead ones included), a job: what a claim
    # walks; on the ready index(es), and on every index of the sqlq_* tables
    "ready_reads": "SELECT coalesce(sum(idx_tup_read), 0) FROM pg_stat_user_indexes"
                   " WHERE relname = 'sqlq_jobs' AND indexrelname LIKE '%ready%'",
    "index_reads": "SELECT coalesce(sum(idx_tup_read), 0) FROM pg_stat_user_indexes"
                   " WHERE relname LIKE 'sqlq%'",
    "ready_index": "SELECT coalesce(sum(pg_relation_size(indexrelid)), 0) FROM pg_index"
                   " WHERE indrelid = 'sqlq_jobs'::regclass"
                   " AND indexrelid::regclass::text LIKE '%ready%'",
    "indexes": "SELECT coalesce(sum(pg_relation_size(indexrelid)), 0) FROM pg_index"
               " WHERE indrelid = 'sqlq_jobs'::regclass",
    "table": "SELECT pg_relation_size('sqlq_jobs')",
    "all_relations": "SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0)"
                     " FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace"
                     " WHERE c.relkind IN ('r', 'p') AND c.relname LIKE 'sqlq%'"
                     " AND n.nspname NOT IN ('pg_catalog', 'information_schema')",
}
# after a VACUUM of the sqlq_* tables under the holder: the dead rows it could not remove
PG_KEPT = ("SELECT coalesce(sum(n_dead_tup), 0) FROM pg_stat_user_tables"
           " WHERE relname LIKE 'sqlq%'")
PG_READS_BY_INDEX = ("SELECT indexrelname, idx_tup_read FROM pg_stat_user_indexes"
                     " WHERE relname LIKE 'sqlq%' AND idx_tup_read > 0"
                     " ORDER BY idx_tup_read DESC")
PG_TABLES = "SELECT relname FROM pg_stat_user_tables WHERE relname LIKE 'sqlq%'"


class PgSide:
    """pg_peers' sqlq-pg system: its own durable throwaway server (tests/pgserver.py)
    for the whole run, a fresh database per row (CHECKPOINTed before use, dropped
    after); the holder is a psycopg session of this process."""

    name = "postgres"

    def __init__(self) -> None:
        from pg_peers import SqlqPg

        self.system = SqlqPg()

    def unavailable(self) -> str | None:
        why: str | None = self.system.unavailable()
        return why

    @contextlib.contextmanager
    def place(self) -> Iterator[str]:
        d = Path(tempfile.mkdtemp(prefix="sqlq-bench-horizon-"))
        self.system.start(d)
        try:
            yield str(self.system.url)
        finally:
            self.system.stop()
            shutil.rmtree(d, ignore_errors=True)

    def settle(self, url: str) -> None:
        """Between the fill and the drain: VACUUM ANALYZE, as a queue in its steady
        state would have had, so that autovacuum's first pass over the fresh rows (and
        the planner's first statistics) do not land in the drain's first tenth."""
        import psycopg

        with psycopg.connect(url, autocommit=True) as conn:
            for (table,) in conn.execute(PG_TABLES).fetchall():
                conn.execute(f'VACUUM ANALYZE "{table}"')

    @contextlib.contextmanager
    def holder(self, url: str, kind: str) -> Iterator[None]:
        import psycopg

        if kind == "none":
            yield
            return
        conn = psycopg.connect(url, application_name=f"horizon-holder-{kind}")
        try:
            if kind == "snapshot":
                conn.isolation_level = psycopg.IsolationLevel.REPEATABLE_READ
                conn.execute("SELECT count(*) FROM sqlq_jobs").fetchone()
            elif kind == "idle-xid":
                conn.execute("CREATE TABLE horizon_holder (x int)")
                conn.commit()
                conn.execute("INSERT INTO horizon_holder VALUES (1)")  # an xid, then idle
            else:
                raise ValueError(f"unknown holder {kind!r}")
            yield
        finally:
            conn.close()

    def state(self, url: str, child: dict[str, Any]) -> dict[str, Any]:
        """Measured while the holder is still open, once the drain's session is gone (a
        backend reports its counts to the statistics when it ends)."""
        import psycopg

        with psycopg.connect(url, autocommit=True) as conn:
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:
                busy = conn.execute(
                    "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
                    " AND pid <> pg_backend_pid()"
                    " AND coalesce(application_name, '') NOT LIKE 'horizon-holder%'"
                ).fetchone()
                if busy is not None and busy[0] == 0:
                    break
                time.sleep(0.05)
            conn.execute("SELECT pg_stat_clear_snapshot()")
            out: dict[str, Any] = {key: self._int(conn, sql) for key, sql in PG_STATE.items()}
            out["reads_by_index"] = dict(conn.execute(PG_READS_BY_INDEX).fetchall())
            for (table,) in conn.execute(PG_TABLES).fetchall():
                conn.execute(f'VACUUM "{table}"')
            conn.execute("SELECT pg_stat_clear_snapshot()")
            out["kept"] = self._int(conn, PG_KEPT)
            return out

    @staticmethod
    def _int(conn: Any, sql: str) -> int:
        row = conn.execute(sql).fetchone()
        return int(row[0]) if row is not None and row[0] is not None else 0

    def stop(self) -> None:
        if self.system.server is not None:
            self.system.server.stop()
            self.system.server = None


# ------------------------------------------------------------ one row, many rows


@dataclass
class Result:
    tree: str
    backend: str
    n: int
    holder: str
    loop: str
    first: float  # jobs/s in the first tenth
    last: float  # jobs/s in the last tenth
    overall: float
    fill_s: float
    state: dict[str, Any]
    sqlq: str
    tenths: list[float]  # jobs/s of each tenth, in order
    # each tenth's rate as the median of its hundredths' rates: a stall of the shared
    # machine (another process on the core for 50 ms) moves it much less
    steady: list[float]

    @property
    def ratio(self) -> float:
        return self.last / self.first if self.first else 0.0

    @property
    def steady_ratio(self) -> float:
        """Last over first tenth, each the median of its hundredths' rates."""
        return self.steady[-1] / self.steady[0] if self.steady and self.steady[0] else 0.0


def _steady(hundredths: list[list[float]], n: int) -> list[float]:
    """Per tenth, the median rate of the hundredths that end in it."""
    tenth = max(1, n // 10)
    rates: list[list[float]] = [[] for _ in range(10)]
    for (d0, t0), (d1, t1) in zip(hundredths, hundredths[1:], strict=False):
        if t1 > t0:
            rates[min(9, (int(d1) - 1) // tenth)].append((d1 - d0) / (t1 - t0))
    return [statistics.median(r) if r else 0.0 for r in rates]


def run_one(side: Any, tree: Tree, n: int, holder: str, loop: str,
            durability: str, progress: Log | None = None) -> Result:
    """One row in a fresh file or database of ``side``."""
    with side.place() as where:
        return measure(side, where, tree, n, holder, loop, durability, progress)


def measure(side: Any, where: str, tree: Tree, n: int, holder: str, loop: str,
            durability: str, progress: Log | None = None) -> Result:
    """Schema first (the holder reads sqlq_jobs), then the holder, then fill and drain
    in the tree's child, then the state while the holder still holds."""
    base = {"where": where, "durability": durability}
    tree.run({**base, "stage": "init"})
    with side.holder(where, holder):
        child = tree.run({**base, "stage": "drain", "n": n, "loop": loop},
                         lambda: side.settle(where), progress)
        state = side.state(where, child)
    marks = child["marks"]
    tenth = max(1, n // 10)
    return Result(tree.label, side.name, n, holder, loop,
                  first=tenth / (marks[1] - marks[0]), last=tenth / (marks[-1] - marks[-2]),
                  overall=n / (marks[-1] - marks[0]), fill_s=child["fill_s"], state=state,
                  sqlq=child["sqlq"],
                  tenths=[tenth / (b - a) for a, b in zip(marks, marks[1:], strict=False)],
                  steady=_steady(child["hundredths"], n))


def _short(n: int) -> str:
    return f"{n // 1000}k" if n % 1000 == 0 else str(n)


def _mb(b: float) -> str:
    return f"{b / 2**20:,.1f} MB"


def state_text(r: Result) -> str:
    s = r.state
    if r.backend == "sqlite":
        return f"-wal {_mb(s['wal_end'])} at the end, peak {_mb(s['wal_peak'])}"
    reads = ", ".join(f"{name} {count / r.n:,.1f}" for name, count
                      in s.get("reads_by_index", {}).items() if count >= r.n)
    return (f"index entries read a job: {reads or 'none above 1'}; dead {s['dead']:,},"
            f" {s['kept']:,} kept by VACUUM; ready index {_mb(s['ready_index'])},"
            f" sqlq_* {_mb(s['all_relations'])}")


def plan(backends: list[str], holders: list[str]) -> list[tuple[str, str]]:
    """(backend, holder) pairs: idle-xid is PostgreSQL's only."""
    return [(b, h) for b in backends for h in holders
            if not (h == "idle-xid" and b != "postgres")]


def run_all(trees: list[Tree], sizes: list[int], backends: list[str], holders: list[str],
            loops: list[str], runs: int, durability: str, log: Log,
            progress_from: int = 0) -> list[Result]:
    """Run after run; within a run size, backend, holder, loop, and the trees innermost
    (side by side, so they share the machine's slow and fast moments). Drains of
    ``progress_from`` jobs or more (0: none) log each tenth as it ends."""
    sides: dict[str, Any] = {"sqlite": SqliteSide(), "postgres": PgSide()}
    out: list[Result] = []
    try:
        live = []
        for b in backends:
            why = sides[b].unavailable()
            if why:
                log(f"  SKIPPED {b}: {why}")
            else:
                live.append(b)
        for run in range(runs):
            for n in sizes:
                for backend, holder in plan(live, holders):
                    for loop in loops:
                        for tree in trees:
                            try:
                                r = run_one(sides[backend], tree, n, holder, loop,
                                            durability,
                                            log if 0 < progress_from <= n else None)
                            except Exception as exc:  # noqa: BLE001 - the other rows still run
                                log(f"  run {run + 1} {tree.label:18} {backend:8}"
                                    f" {_short(n):>5} {holder:8} {loop:6} ERROR {exc}")
                                continue
                            out.append(r)
                            log(f"  run {run + 1} {tree.label:18} {backend:8} {_short(n):>5}"
                                f" {holder:8} {loop:6} first {r.first:8,.0f}/s last"
                                f" {r.last:8,.0f}/s  {r.ratio:5.2f}x (steady"
                                f" {r.steady_ratio:.2f}x)  overall"
                                f" {r.overall:8,.0f}/s  {state_text(r)}")
    finally:
        for side in sides.values():
            side.stop()
    return out


def table(results: list[Result]) -> str:
    """Medians of the runs per (tree, backend, N, holder, loop); the ratio column is the
    median of each run's last/first, and its range; "steady" the same ratio with each
    tenth's rate the median of its hundredths'. With several trees, "vs 1st" is a
    tree's overall rate over the first tree's in the same row."""
    groups: dict[tuple[str, int, str, str, str], list[Result]] = {}
    for r in results:
        groups.setdefault((r.backend, r.n, r.holder, r.loop, r.tree), []).append(r)
    trees = list(dict.fromkeys(r.tree for r in results))
    several = len(trees) > 1
    width = max([4, *(len(t) for t in trees)])
    head = (f"{'backend':8} {'N':>5} {'holder':8} {'loop':6} {'tree':{width}} {'first/s':>8}"
            f" {'last/s':>8} {'last/first':>10} {'range':>11} {'steady':>7} {'overall/s':>9}"
            + (f" {'vs 1st':>6}" if several else "") + " runs  state (last run)")
    lines = [head, "-" * len(head)]

    def overall(key: tuple[str, int, str, str, str]) -> float | None:
        rs = groups.get(key)
        return statistics.median(r.overall for r in rs) if rs else None

    for key in sorted(groups, key=lambda k: (k[0], k[1], HOLDERS.index(k[2]), k[3],
                                             trees.index(k[4]))):
        rs = groups[key]
        ratios = [r.ratio for r in rs]
        lo, hi = min(ratios), max(ratios)
        mine, base = overall(key), overall((*key[:4], trees[0]))
        vs = f" {mine / base:5.2f}x" if several and mine and base else (" " * 7 if several else "")
        lines.append(
            f"{rs[0].backend:8} {_short(rs[0].n):>5} {rs[0].holder:8} {rs[0].loop:6}"
            f" {rs[0].tree:{width}} {statistics.median(r.first for r in rs):8,.0f}"
            f" {statistics.median(r.last for r in rs):8,.0f} {statistics.median(ratios):9.2f}x"
            f" {f'{lo:.2f}-{hi:.2f}':>11}"
            f" {statistics.median(r.steady_ratio for r in rs):6.2f}x"
            f" {statistics.median(r.overall for r in rs):9,.0f}{vs}"
            f" {len(rs):4}  {state_text(rs[-1])}")
    return "\n".join(lines)


# ------------------------------------------------------------ bench/run.py's rows


def samples(results: list[Result]) -> dict[str, list[Any]]:
    """run.py's table rows (workloads.Sample) by system name: sqlq-normal for the file,
    sqlq-pg for PostgreSQL. Two rows per (N, holder, loop): the drain's overall rate,
    and last/first."""
    from workloads import Sample

    out: dict[str, list[Any]] = {}
    for r in results:
        system = "sqlq-pg" if r.backend == "postgres" else "sqlq-normal"
        name = f"horizon {_short(r.n)}, {r.holder}, {r.loop}"
        notes = (f"first tenth {r.first:,.0f}/s, last {r.last:,.0f}/s ({r.ratio:.2f}x,"
                 f" steady {r.steady_ratio:.2f}x); {state_text(r)}")
        extra = {"first": r.first, "last": r.last, "steady": r.steady, "state": r.state,
                 "tree": r.tree}
        out.setdefault(system, []).extend([
            Sample(f"{name}: drain", r.overall, notes, extra),
            Sample(f"{name}: last/first", r.ratio, notes, extra)])
    return out


# ------------------------------------------------------------ command line


def _csv(text: str, known: list[str], what: str) -> list[str]:
    items = [x.strip() for x in text.split(",") if x.strip()]
    bad = [x for x in items if x not in known]
    if bad or not items:
        raise SystemExit(f"--{what} {text!r}: choose from {', '.join(known)}")
    return items


def main(argv: list[str]) -> int:
    if argv[:1] == ["--child"]:
        print(json.dumps(child_main(json.loads(argv[1]))), flush=True)
        return 0
    p = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    p.add_argument("--sizes", default="20000", help="jobs per drain, comma-separated")
    p.add_argument("--full", action="store_true", help="sizes 20000,100000")
    p.add_argument("--backends", default="sqlite,postgres")
    p.add_argument("--holders", default="none,snapshot", help=", ".join(HOLDERS))
    p.add_argument("--holder", dest="holders", help="the same as --holders")
    p.add_argument("--loops", default="fast,delete", help=", ".join(LOOPS))
    p.add_argument("--runs", type=int, default=1)
    p.add_argument("--durability", default="normal", choices=["full", "normal"])
    p.add_argument("--sqlq", "--tree", dest="trees", action="append", default=[],
                   metavar="TREE", help="a checkout whose sqlq/ to run (repeat to compare;"
                   " default this one)")
    p.add_argument("--json", default=str(HERE / ".work" / "horizon.json"),
                   help="where every run's values go")
    a = p.parse_args(argv)
    try:
        sizes = [int(s) for s in ("20000,100000" if a.full else a.sizes).split(",")]
    except ValueError:
        raise SystemExit(f"--sizes {a.sizes!r}: whole numbers, comma-separated") from None
    if any(n < 10 or n % 10 for n in sizes):
        raise SystemExit("--sizes: multiples of 10 (the drain is timed by tenths)")
    if a.runs < 1:
        raise SystemExit("--runs: at least 1")
    backends = _csv(a.backends, BACKENDS, "backends")
    holders = _csv(a.holders, HOLDERS, "holders")
    loops = _csv(a.loops, list(LOOPS), "loops")
    trees = [Tree.of(t) for t in a.trees] or [Tree.of(str(ROOT))]
    if "idle-xid" in holders and "sqlite" in backends:
        print("holder idle-xid: PostgreSQL only (a SQLite reader holds the -wal by its"
              " snapshot alone)", flush=True)

    print(f"horizon bench {dt.datetime.now():%Y-%m-%d %H:%M}: sizes {sizes}, backends"
          f" {backends}, holders {holders}, loops {loops} ("
          + "; ".join(f"{k}: {LOOPS[k]}" for k in loops)
          + f"), durability {a.durability}, {a.runs} run(s), trees "
          + ", ".join(f"{t.label} ({t.path})" for t in trees), flush=True)
    t0 = time.monotonic()
    results = run_all(trees, sizes, backends, holders, loops, a.runs, a.durability,
                      lambda m: print(m, flush=True), PROGRESS_FROM)
    print("\n" + table(results))
    path = Path(a.json)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({
        "date": dt.datetime.now().isoformat(timespec="seconds"),
        "command": "bench/horizon.py " + " ".join(argv),
        "elapsed_s": time.monotonic() - t0, "durability": a.durability,
        "loops": {k: LOOPS[k] for k in loops},
        "trees": [{"label": t.label, "path": str(t.path)} for t in trees],
        "results": [{**r.__dict__, "ratio": r.ratio, "steady_ratio": r.steady_ratio}
                    for r in results]}, indent=1))
    print(f"\nevery run's values: {path} ({(time.monotonic() - t0) / 60:.1f} min)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
