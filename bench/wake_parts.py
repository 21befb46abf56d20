"""Where a wake's time goes: timestamps on one clock in the producer and the consumer.

    .venv/bin/python bench/wake_parts.py [--db sqlite|URL] [--samples 150] [--floor] [--row]

The wake workload of ``workloads.py`` (a consumer blocked in ``reserve(delete=prev)``,
a producer putting one job every 10-20 ms), with both processes stamping
``time.monotonic_ns()`` (CLOCK_MONOTONIC: one clock for every process) at each step,
by wrapping sqlq's methods from outside (nothing in sqlq knows). Prints the median
and p90 of each step's share, from the put's start:

  put → commit (the write returned) → notified (SQLite: the notify byte read) →
  put returned | woke (the notifier's wait returned) → look (has_ready) → claim →
  reserve returned

and how many looks a wake took. ``--row`` stamps the bench row's own run instead
(targets.py group "8": ``workloads.run_wake`` on ``sqlq-normal``, forked children,
its payload, its clock read in the body), and prints the row's p50 and p99 with it.
``--floor`` also measures what no queue can beat on
this machine at this moment: sqlq's own put and claim statements on bare apsw, woken
by a bare inotify watch on the notify file (what the kernel and SQLite cost a wake,
without sqlq's Python), a pipe ping-pong and an inotify ping-pong between two
processes, timed the same way (send → the other side's read returning), and what the
first bit of work after a sleep costs against the same work warm (both processes of a
wake have just slept: the producer between puts, the consumer in its wait).
"""

from __future__ import annotations

import argparse
import contextlib
import multiprocessing as mp
import os
import pickle
import random
import select
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

# The sqlq to measure: this work tree's, or another's (--sqlq, for an A/B in one run).
_at = sys.argv.index("--sqlq") + 1 if "--sqlq" in sys.argv else 0
sys.path.insert(0, sys.argv[_at] if _at else str(Path(__file__).resolve().parent.parent))

CTX = mp.get_context("spawn")
FORK = mp.get_context("fork")  # the floor's children inherit their pipes
TUBE = "wake"
MARKS: list[tuple[str, int]] = []


def mark(label: str) -> None:
    MARKS.append((label, time.monotonic_ns()))


def wrap(owner: Any, name: str, label: str, after_only: bool = False) -> None:
    """Stamp ``label>`` when owner.name is called and ``label<`` when it returns."""
    fn = getattr(owner, name, None)
    if fn is None:
        return  # not in this version of sqlq

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        if not after_only:
            mark(label + ">")
        try:
            return fn(*args, **kwargs)
        finally:
            mark(label + "<")

    setattr(owner, name, wrapper)


def instrument() -> None:
    import sqlq.queue as queue
    from sqlq.backends.sqlite import db, wakeup

    wrap(db.Database, "_published", "published")
    wrap(db.Database, "check_wal", "check_wal")
    wrap(db.Database, "_check_wal_dir", "check_wal_dir")
    wrap(wakeup.Notifier, "drain", "drain")
    try:  # backends/postgres/wakeup.py was listen.py before the backend folders lined up
        from sqlq.backends.postgres import wakeup as listen
    except ImportError:
        from sqlq.backends.postgres import listen  # type: ignore[no-redef]
    wrap(listen.PgNotifier, "drain", "drain")
    wrap(listen.Listener, "_wake_all", "listener")
    from sqlq.backends.postgres import db as pgdb
    wrap(pgdb.Database, "_commit_mode", "setmode")
    wrap(queue.Queue, "_look", "look")
    wrap(queue.Queue, "_claim", "claim")
    try:  # the reservation engine (sqlq/verbs since the verb contract)
        from sqlq.verbs import engine
    except ImportError:
        pass
    else:
        wrap(engine.Engine, "look", "look")
        wrap(engine.Engine, "_claim", "claim")
    wrap(queue.Queue, "has_ready", "has_ready")
    if os.environ.get("WAKE_PARTS_FINE"):
        from sqlq.backends.sqlite import store
        claims = getattr(store, "SQLiteClaims", None) or store.SQLiteStore  # before the split
        wrap(claims, "_promote", "promote")
        wrap(claims, "has_ready_job", "has_ready_job")
        wrap(wakeup.Notifier, "pause", "pause")
        wrap(wakeup.Notifier, "resume", "resume")


def consumer(target: str, conn: Any, samples: int) -> list[tuple[str, int]]:
    instrument()
    import sqlq

    q = sqlq.Queue(target, durability="normal") if "://" not in target else sqlq.Queue(target)
    conn.send("ready")
    prev = None
    for _ in range(samples + 1):
        mark("reserve>")
        job = q.reserve([TUBE], timeout=30, delete=prev)
        mark("reserve<")
        if job is None or job.body == b"stop":
            break
        prev = job
        conn.send("got")
    q.close()
    return MARKS


def producer(target: str, conn: Any, samples: int) -> list[tuple[str, int]]:
    instrument()
    import sqlq

    q = sqlq.Queue(target, durability="normal") if "://" not in target else sqlq.Queue(target)
    conn.recv()
    time.sleep(0.2)
    rnd = random.Random(7)
    for _ in range(samples):
        time.sleep(rnd.uniform(0.010, 0.020))
        mark("put>")
        q.put(b"x" * 100, tube=TUBE)
        mark("put<")
        if not conn.poll(10):
            break
        conn.recv()
    q.put(b"stop", tube=TUBE)
    q.close()
    return MARKS


def row(samples: int) -> None:
    """The bench row's wake run, stamped: its children are forked from here, so they
    inherit the wrapped methods, and leave their stamps in a file for the analysis."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import workloads as wl
    from systems import Sqlq

    import sqlq.queue as queue

    instrument()
    wrap(queue.Queue, "put", "put")  # the stamps wake_parts' own children make by hand
    wrap(queue.Queue, "reserve", "reserve")
    with tempfile.TemporaryDirectory() as d:
        for role in ("_wake_consumer", "_wake_producer"):
            setattr(wl, role, _stamped(getattr(wl, role), os.path.join(d, role)))
        # The row's budget: 2.5 s for 150 samples (run.py's wake_budget).
        p50, p99 = wl.run_wake(Sqlq("normal"), samples, samples / 60)
        marks = {}
        for role in ("_wake_consumer", "_wake_producer"):
            with open(os.path.join(d, role), "rb") as f:
                marks[role] = pickle.load(f)
    print(f"bench row 8 (stamped): wake p50 {p50.value:.3f} ms, p99 {p99.value:.3f} ms "
          f"({p50.notes})")
    analyse(marks["_wake_producer"], marks["_wake_consumer"])


def _stamped(fn: Callable[..., Any], out: str) -> Callable[..., Any]:
    def child(*args: Any) -> Any:
        MARKS.clear()  # what the parent stamped before the fork is not this child's
        try:
            return fn(*args)
        finally:
            with open(out, "wb") as f:
                pickle.dump(MARKS, f)

    return child


def run(fn: Callable[..., Any], *args: Any, ctx: Any = CTX) -> Any:
    parent, child = ctx.Pipe()
    p = ctx.Process(target=_child, args=(fn, child, *args))
    p.start()
    return p, parent


def _child(fn: Callable[..., Any], out: Any, *args: Any) -> None:
    out.send(fn(*args))


def pct(xs: list[float], p: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(p * len(xs)))]


#: Steps stamped only with WAKE_PARTS_FINE=1: the first entry and exit of each is shown.
FINE = ("promote", "has_ready_job", "pause", "resume", "listener", "setmode", "check_wal",
        "check_wal_dir")


def analyse(prod: list[tuple[str, int]], cons: list[tuple[str, int]]) -> None:
    puts = [i for i, (label, _) in enumerate(prod) if label == "put>"]
    rows: dict[str, list[float]] = {}
    looks: list[int] = []
    for k, i in enumerate(puts):
        t0 = prod[i][1]
        end = prod[puts[k + 1]][1] if k + 1 < len(puts) else 1 << 62
        p = {label: t for label, t in prod[i:] if t0 <= t < end}
        c = [(label, t) for label, t in cons if t0 <= t < end]
        ret = next((t for label, t in c if label == "reserve<"), None)
        if ret is None:
            continue
        c = [(label, t) for label, t in c if t <= ret]
        first = {}
        for label, t in c:
            first.setdefault(label, t)
        last = {label: t for label, t in c}
        looks.append(sum(1 for label, _ in c if label == "look>"))
        steps = {
            "commit (published> / put<)": p.get("published>", p.get("put<")),
            "notified (published<)": p.get("published<"),
            "put returned": p.get("put<"),
            "consumer woke (drain>)": first.get("drain>"),
            "events read (drain<)": first.get("drain<"),
            "first look starts": first.get("look>"),
            "last look starts": last.get("look>"),
            "claim starts (last)": last.get("claim>"),
            "claim returns (last)": last.get("claim<"),
            **{label: first.get(label) for step in FINE for label in (step + ">", step + "<")},
            "reserve returned": ret,
        }
        for name, t in steps.items():
            if t is not None:
                rows.setdefault(name, []).append((t - t0) / 1e6)
        if "put<" in p:  # the consumer's share: from the producer's acknowledged commit
            rows.setdefault("= reserve returned - put returned", []).append(
                (ret - p["put<"]) / 1e6)
    print(f"{'step (ms from put start)':36} {'p50':>7} {'p90':>7} {'n':>5}")
    for name, xs in rows.items():
        print(f"{name:36} {statistics.median(xs):7.3f} {pct(xs, 0.9):7.3f} {len(xs):5}")
    print(f"looks per wake: median {statistics.median(looks)}, max {max(looks)}, "
          f"wakes with >1 look: {sum(1 for n in looks if n > 1)}/{len(looks)}")


# -------------------------------------------------------------------- the floor


def pong_pipe(r: int, w: int, n: int) -> list[int]:
    out = []
    for _ in range(n):
        select.select([r], [], [])
        os.read(r, 8)
        out.append(time.monotonic_ns())
        os.write(w, b"k")
    return out


def pong_inotify(directory: str, w: int, n: int) -> list[int]:
    from sqlq.backends.sqlite.inotify import Flags, INotify

    ino = INotify()
    ino.add_watch(directory, Flags.ACCESS)
    os.write(w, b"r")
    out = []
    for _ in range(n):
        select.select([ino.fileno()], [], [])
        os.read(ino.fileno(), 65536)
        out.append(time.monotonic_ns())
        os.write(w, b"k")
    return out


def _bare_conn(path: str) -> Any:
    import apsw

    conn = apsw.Connection(path)
    conn.execute("PRAGMA synchronous = NORMAL")
    conn.setbusytimeout(1000)
    return conn


def bare_consumer(path: str, owners: str, w: int, n: int, wal: bool = False
                  ) -> list[tuple[int, int]]:
    """sqlq's own claim statement on bare apsw, woken by a bare inotify watch on the
    notify file's reads (db.Database._published: the commit is visible): what the
    kernel and SQLite cost a wake, without sqlq's Python."""
    from sqlq.backends.sqlite.inotify import Flags as flags
    from sqlq.backends.sqlite.inotify import INotify
    from sqlq.backends.sqlite.store import _CLAIM_JOB_IN_TUBE, _lease

    conn = _bare_conn(path)
    ino = INotify()
    ino.add_watch(owners, flags.ACCESS | flags.CLOSE_WRITE)
    if wal:  # the -wal's writes too, as wakeup.Notifier watches (a read looks first)
        ino.add_watch(os.path.dirname(path), flags.MODIFY)
    poller = select.poll()
    poller.register(ino.fileno(), select.POLLIN)
    os.write(w, b"r")
    out = []
    woke = []
    while len(out) < n:
        poller.poll(1000)
        woke.append(time.monotonic_ns())
        with contextlib.suppress(BlockingIOError):
            os.read(ino.fileno(), 65536)
        now = time.time_ns() // 1_000_000
        if wal and not conn.execute(_READY, (TUBE,)).fetchall()[0][0]:
            continue
        rows = conn.execute(_CLAIM_JOB_IN_TUBE, (now, None, TUBE, _lease())).fetchall()
        if rows:
            out.append((woke[-1], time.monotonic_ns()))
            conn.execute("DELETE FROM sqlq_jobs WHERE id = ?", (rows[0][0],))
            os.write(w, b"k")
    return out


_READY = "SELECT EXISTS (SELECT 1 FROM sqlq_jobs WHERE state = 0 AND tube = (SELECT ?))"


def bare_floor(n: int, rnd: random.Random, wal: bool = False) -> None:
    import sqlq
    from sqlq.backends.sqlite.store import _INSERT_READY_JOB

    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "q.db")
        sqlq.Queue(path, durability="normal").close()
        owners = path + "-sqlq"
        r2, w2 = os.pipe()
        p, out = run(bare_consumer, path, owners, w2, n, wal, ctx=FORK)
        os.read(r2, 1)
        conn = _bare_conn(path)
        fd = os.open(os.path.join(owners, "notify"), os.O_RDONLY)
        sent, done = [], []
        for _ in range(n):
            time.sleep(rnd.uniform(0.010, 0.020))
            sent.append(time.monotonic_ns())
            conn.execute(_INSERT_READY_JOB, (TUBE, 1024, 60_000, b"x" * 100,
                                             time.time_ns() // 1_000_000))
            os.pread(fd, 1, 0)
            done.append(time.monotonic_ns())
            os.read(r2, 1)
        got = out.recv()
        p.join()
        os.close(fd)
    lat = [(g - s) / 1e6 for s, (_, g) in zip(sent, got, strict=True)]
    woke = [(w - s) / 1e6 for s, (w, _) in zip(sent, got, strict=True)]
    claim = [(g - w) / 1e6 for w, g in got]
    put = [(e - s) / 1e6 for s, e in zip(sent, done, strict=True)]
    kind = " (+ -wal watch)" if wal else ""
    print(f"floor, sqlq's SQL on bare apsw+inotify{kind}: p50 {statistics.median(lat):.3f} ms, "
          f"p90 {pct(lat, 0.9):.3f}, p99 {pct(lat, 0.99):.3f} (n={n}); p50s: put and "
          f"notify {statistics.median(put):.3f} ms, consumer woke at "
          f"{statistics.median(woke):.3f}, claimed {statistics.median(claim):.3f} after")


def _spin(n: int) -> int:
    total = 0
    for i in range(n):
        total += i * i
    return total


def cold_floor(n: int, rnd: random.Random) -> None:
    """The same few instructions timed first thing after a 10-20 ms sleep and warm: on
    a virtual machine whose idle CPU halts, the first work after a wake pays for
    caches and TLBs refilled (every step of a wake's first microseconds pays it)."""
    pc = time.perf_counter_ns
    cold, warm = [], []
    for _ in range(n):
        time.sleep(rnd.uniform(0.010, 0.020))
        t0 = pc()
        _spin(10)
        t1 = pc()
        _spin(10)
        t2 = pc()
        cold.append((t1 - t0) / 1e3)
        warm.append((t2 - t1) / 1e3)
    print(f"floor, 10 loop turns first thing after a sleep: p50 {statistics.median(cold):.1f} "
          f"us, the same turns right after: {statistics.median(warm):.1f} us (n={n})")


def floor(n: int) -> None:
    rnd = random.Random(3)
    cold_floor(n, rnd)
    bare_floor(n, rnd)
    for kind in ("pipe", "inotify"):
        r1, w1 = os.pipe()
        r2, w2 = os.pipe()
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "notify")
            Path(path).write_bytes(b"\n")
            if kind == "pipe":
                p, out = run(pong_pipe, r1, w2, n, ctx=FORK)
            else:
                p, out = run(pong_inotify, d, w2, n, ctx=FORK)
                os.read(r2, 1)
            fd = os.open(path, os.O_RDONLY)
            sent = []
            for _ in range(n):
                time.sleep(rnd.uniform(0.010, 0.020))
                sent.append(time.monotonic_ns())
                if kind == "pipe":
                    os.write(w1, b"p")
                else:
                    os.pread(fd, 1, 0)
                os.read(r2, 1)
            got = out.recv()
            p.join()
            os.close(fd)
        lat = [(g - s) / 1e6 for s, g in zip(sent, got, strict=True)]
        print(f"floor, {kind} ping: p50 {statistics.median(lat):.3f} ms, "
              f"p90 {pct(lat, 0.9):.3f}, p99 {pct(lat, 0.99):.3f} (n={n})")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--db", default="sqlite",
                    help="'sqlite' (a temporary file), 'pg' (a durable throwaway server) or a URL")
    ap.add_argument("--samples", type=int, default=150)
    ap.add_argument("--floor", action="store_true")
    ap.add_argument("--row", action="store_true",
                    help="stamp the bench row's own wake run (SQLite, normal) instead")
    ap.add_argument("--sqlq", help="the work tree whose sqlq to measure (default: this one)")
    args = ap.parse_args()
    if args.floor:
        floor(args.samples)
    if args.row:
        row(args.samples)
        return
    with tempfile.TemporaryDirectory() as d:
        target = os.path.join(d, "q.db") if args.db == "sqlite" else args.db
        if args.db == "pg":
            sys.path.insert(1, str(Path(__file__).resolve().parent.parent / "tests"))
            from pgserver import PgServer

            server = PgServer(durable=True).start()
            server.create_database("wake")
            target = server.url_for("wake")
        import sqlq

        print(f"sqlq from {Path(sqlq.__file__).parent.parent}")
        sqlq.Queue(target, durability="normal").close()
        a, b = CTX.Pipe()
        pc, cons = run(consumer, target, a, args.samples)
        pp, prod = run(producer, target, b, args.samples)
        cmarks, pmarks = cons.recv(), prod.recv()
        pc.join()
        pp.join()
    analyse(pmarks, cmarks)


if __name__ == "__main__":
    main()
