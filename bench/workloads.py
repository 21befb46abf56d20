"""The workloads. Each ``run_*`` function measures one run of one system and
returns a list of ``Sample`` (one per metric it measures).

Every measurement happens in processes forked from the orchestrator, which
never opens a database or a connection itself, so each run starts clean:
a fresh directory under /tmp (or a fresh beanstalkd), fresh connections.
"""

from __future__ import annotations

import contextlib
import multiprocessing as mp
import os
import random
import resource
import shutil
import statistics
import struct
import subprocess
import sys
import tempfile
import time
import traceback
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from systems import NotSupported, System

CTX = mp.get_context("fork")
PAYLOAD = 128          # bytes per job body, the same for every system
BATCH = 1000           # put_many batch size
FILL_BATCH = 10_000    # batch size used to build big queues
TMP_ROOT = Path(tempfile.gettempdir())


@dataclass
class Sample:
    metric: str
    value: float | None
    notes: str = ""
    extra: dict[str, Any] = field(default_factory=dict)


class ChildError(RuntimeError):
    pass


def body(seq: int) -> bytes:
    head = b"%010d" % seq
    return head + b"x" * (PAYLOAD - len(head))


def seq_of(b: bytes) -> int:
    return int(b[:10])


# ------------------------------------------------------------------ process helpers


def _child_main(conn: Any, fn: Callable[..., Any], args: tuple[Any, ...]) -> None:
    try:
        res = fn(*args)
        conn.send((True, res))
    except BaseException:  # noqa: BLE001 - report everything to the parent
        conn.send((False, traceback.format_exc(limit=6)))
    finally:
        conn.close()


class Child:
    """A forked process running ``fn(*args)``; ``result()`` returns its value."""

    def __init__(self, fn: Callable[..., Any], *args: Any) -> None:
        self.rx, tx = CTX.Pipe(duplex=False)
        self.proc = CTX.Process(target=_child_main, args=(tx, fn, args), daemon=True)
        self.proc.start()
        tx.close()

    def result(self, timeout: float) -> Any:
        if not self.rx.poll(timeout):
            self.kill()
            raise ChildError(f"timed out after {timeout:.0f} s")
        try:
            ok, val = self.rx.recv()
        except EOFError:
            self.proc.join(5)
            raise ChildError(f"child died (exit code {self.proc.exitcode})") from None
        self.proc.join(10)
        if not ok:
            raise ChildError(val.strip().splitlines()[-1] + "\n" + val)
        return val

    def kill(self) -> None:
        if self.proc.is_alive():
            self.proc.kill()
        self.proc.join(5)


def in_child(fn: Callable[..., Any], *args: Any, timeout: float = 600) -> Any:
    return Child(fn, *args).result(timeout)


@contextlib.contextmanager
def fresh(system: System) -> Iterator[Path]:
    d = Path(tempfile.mkdtemp(prefix=f"sqlq-bench-{system.name}-", dir=TMP_ROOT))
    try:
        system.start(d)
        try:
            yield d
        finally:
            system.stop()
    finally:
        shutil.rmtree(d, ignore_errors=True)


def _fill(system: System, n: int, start: int = 0, delayed: bool = False) -> float:
    """Put n jobs (bodies start..start+n-1) with a setup client; returns seconds."""
    c = system.client(setup=True)
    t0 = time.perf_counter()
    try:
        for lo in range(start, start + n, FILL_BATCH):
            bodies = [body(i) for i in range(lo, min(lo + FILL_BATCH, start + n))]
            try:
                if delayed:
                    c.put_delayed_many(bodies)
                else:
                    c.put_many(bodies)
            except NotSupported:
                if delayed:
                    raise
                for b in bodies:
                    c.put(b)
    finally:
        c.close()
    return time.perf_counter() - t0


def pct(values: list[float], q: float) -> float:
    s = sorted(values)
    if not s:
        return float("nan")
    k = min(len(s) - 1, max(0, int(round(q * (len(s) - 1)))))
    return s[k]


# ------------------------------------------------------------------------ enqueue


def _put_one(system: System, n: int) -> float:
    c = system.client()
    bodies = [body(i) for i in range(n)]
    t0 = time.perf_counter()
    for b in bodies:
        c.put(b)
    dt = time.perf_counter() - t0
    c.close()
    return n / dt


def run_put_one(system: System, n: int) -> list[Sample]:
    with fresh(system):
        rate = in_child(_put_one, system, n)
    return [Sample("put, 1 per tx", rate)]


def _put_many(system: System, n: int) -> float:
    c = system.client()
    batches = [[body(i) for i in range(lo, min(lo + BATCH, n))] for lo in range(0, n, BATCH)]
    t0 = time.perf_counter()
    for bs in batches:
        c.put_many(bs)
    dt = time.perf_counter() - t0
    c.close()
    return n / dt


def run_put_many(system: System, n: int) -> list[Sample]:
    with fresh(system):
        rate = in_child(_put_many, system, n)
    return [Sample(f"put_many, {BATCH}/tx", rate)]


# -------------------------------------------------------------------------- drain


def _drain_worker(system: System, ready: Any, go: Any) -> dict[str, Any]:
    """Take with timeout 0 until the queue is empty (every body's sequence number kept)."""
    c = system.client()
    ready.send(1)
    ready.close()
    go.wait()
    seqs: list[int] = []
    prev = None
    t_last = time.monotonic()
    error = ""
    try:
        while True:
            h = c.take(prev, 0)
            t_last = time.monotonic()
            if h is None:
                break
            seqs.append(seq_of(c.body(h)))
            prev = h
        c.close()
    except Exception as exc:  # noqa: BLE001 - a failing worker is a result, keep its jobs
        error = f"{type(exc).__module__}.{type(exc).__name__}: {exc}"
    return {"seqs": seqs, "t_last": t_last, "error": error}


def gang(system: System, fn: Callable[..., Any], args: list[tuple[Any, ...]],
         timeout: float = 600) -> tuple[float, list[Any], list[str]]:
    """One forked child per ``args`` entry running ``fn(system, ready, go, *entry)``,
    released together once all are ready: (release time, their results, errors)."""
    go = CTX.Event()
    children, readies = [], []
    for a in args:
        rx, tx = CTX.Pipe(duplex=False)
        children.append(Child(fn, system, tx, go, *a))
        tx.close()
        readies.append(rx)
    for rx in readies:
        if not rx.poll(60):
            for c in children:
                c.kill()
            raise ChildError("a worker did not get ready")
        rx.recv()
    t0 = time.monotonic()
    go.set()
    results, errors = [], []
    for c in children:
        try:
            results.append(c.result(timeout))
        except ChildError as exc:
            errors.append(str(exc).splitlines()[0])
    return t0, results, errors + [r["error"] for r in results if r["error"]]


def _drain_sample(metric: str, n: int, procs: int, t0: float, results: list[dict[str, Any]],
                  errors: list[str]) -> Sample:
    seen: Counter[int] = Counter()
    for r in results:
        seen.update(r["seqs"])
    unique = len(seen)
    dup = sum(seen.values()) - unique
    lost = n - len([s for s in seen if 0 <= s < n])
    elapsed = max((r["t_last"] for r in results), default=t0) - t0
    shares = sorted((len(r["seqs"]) / max(1, sum(seen.values())) for r in results), reverse=True)
    notes = []
    if procs > 1:
        notes.append("shares " + "/".join(f"{s * 100:.0f}" for s in shares) + "%")
    notes.append(f"dup {dup}, lost {lost}")
    if errors:
        notes.append(f"{len(errors)} worker(s) failed: {errors[0][:90]}")
    extra = {"dup": dup, "lost": lost, "shares": shares, "errors": errors}
    rate = unique / elapsed if elapsed > 0 and results else None
    return Sample(metric, rate, "; ".join(notes), extra)


def run_drain(system: System, n: int, procs: int) -> list[Sample]:
    metric = f"drain, {procs} process{'es' if procs > 1 else ''}"
    with fresh(system):
        in_child(_fill, system, n)
        t0, results, errors = gang(system, _drain_worker, [()] * procs)
    return [_drain_sample(metric, n, procs, t0, results, errors)]


def _put_worker(system: System, ready: Any, go: Any, lo: int, hi: int) -> dict[str, Any]:
    c = system.client()
    bodies = [body(i) for i in range(lo, hi)]
    ready.send(1)
    ready.close()
    go.wait()
    error = ""
    try:
        for b in bodies:
            c.put(b)
        t_last = time.monotonic()
        c.close()
    except Exception as exc:  # noqa: BLE001 - reported with the figure
        t_last = time.monotonic()
        error = f"{type(exc).__module__}.{type(exc).__name__}: {exc}"
    return {"t_last": t_last, "error": error}


def run_clients(system: System, n: int, clients: int) -> list[Sample]:
    """``clients`` processes put n jobs together (one per transaction), then drain them
    together, on one fresh instance: a server's throughput under concurrent clients."""
    label = f"{clients} client{'s' if clients > 1 else ''}"
    with fresh(system):
        cuts = [n * i // clients for i in range(clients + 1)]
        t0, results, errors = gang(system, _put_worker,
                                   [(cuts[i], cuts[i + 1]) for i in range(clients)])
        elapsed = max((r["t_last"] for r in results), default=t0) - t0
        put = Sample(f"put, {label}", n / elapsed if results and not errors else None,
                     f"{len(errors)} client(s) failed: {errors[0][:90]}" if errors else "")
        t0, results, errors = gang(system, _drain_worker, [()] * clients)
    return [put, _drain_sample(f"drain, {label}", n, clients, t0, results, errors)]


# ----------------------------------------------------------------- wake latency


def _wake_consumer(system: System, to_producer: Any, budget: float) -> list[float]:
    c = system.client()
    to_producer.send("ready")
    lats: list[float] = []
    prev = None
    while True:
        h = c.take(prev, budget + 10)
        t = time.monotonic_ns()
        if h is None:
            break
        b = c.body(h)
        if b.startswith(b"stop"):
            c.finish(h)
            break
        lats.append((t - int(b[:20])) / 1e6)
        prev = h
        to_producer.send("got")
    c.close()
    return lats


def _wake_producer(system: System, from_consumer: Any, samples: int, budget: float) -> int:
    c = system.client()
    if not from_consumer.poll(30):
        raise ChildError("consumer never got ready")
    from_consumer.recv()
    time.sleep(0.2)  # let the consumer block
    rnd = random.Random(7)
    deadline = time.monotonic() + budget
    sent = 0
    pad = b"w" * (PAYLOAD - 20)
    while sent < samples and time.monotonic() < deadline:
        time.sleep(rnd.uniform(0.010, 0.020))  # the consumer is blocked again by now
        c.put(b"%020d" % time.monotonic_ns() + pad)
        sent += 1
        if not from_consumer.poll(max(1.0, deadline - time.monotonic() + 15)):
            break
        from_consumer.recv()
    c.put(b"stop" + b"s" * (PAYLOAD - 4))
    c.close()
    return sent


def run_wake(system: System, samples: int, budget: float) -> list[Sample]:
    with fresh(system):
        a, b = CTX.Pipe(duplex=True)
        consumer = Child(_wake_consumer, system, a, budget)
        producer = Child(_wake_producer, system, b, samples, budget)
        try:
            producer.result(budget + 60)
            lats = consumer.result(budget + 60)
        finally:
            producer.kill()
            consumer.kill()
    if not lats:
        return [Sample("wake p50", None, "no sample"), Sample("wake p99", None, "no sample")]
    note = f"n={len(lats)}"
    return [
        Sample("wake p50", statistics.median(lats), note),
        Sample("wake p99", pct(lats, 0.99), note),
    ]


# ----------------------------------------------------------------------- idle CPU


def _sched_ns(pid: int) -> int:
    """CPU time of a process in ns, summed over its threads (precise, unlike ticks)."""
    total = 0
    with contextlib.suppress(FileNotFoundError):
        for t in os.listdir(f"/proc/{pid}/task"):
            with contextlib.suppress(FileNotFoundError, ValueError):
                total += int(Path(f"/proc/{pid}/task/{t}/schedstat").read_text().split()[0])
    return total


def _idle_consumer(system: System, window: float, parent: Any, go: Any, release: Any) -> None:
    """Block in take for ``window`` seconds; send the CPU it used, then wait to close.

    The connection stays open until the parent has read the server's CPU: a
    server process that serves it (a PostgreSQL backend) must still exist then.
    """
    c = system.client()
    if c.take(None, 0.3) is not None:  # warm-up: lazy imports and notifier set-up
        raise ChildError("idle consumer got a job from an empty queue")
    parent.send("ready")
    go.wait()
    r0 = resource.getrusage(resource.RUSAGE_SELF)
    h = c.take(None, window)
    r1 = resource.getrusage(resource.RUSAGE_SELF)
    if h is not None:
        raise ChildError("idle consumer got a job from an empty queue")
    parent.send((r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime))
    release.wait(120)
    c.close()


def _server_cpu(pids: list[int]) -> dict[int, int]:
    return {p: _sched_ns(p) for p in pids}


def run_idle_all(systems: list[System], window: float) -> dict[str, list[Sample]]:
    """All blocked consumers side by side in one window (they are idle: no contention).

    The server's CPU is read once every consumer is blocked and again before any
    of them closes, per process, so that neither set-up nor teardown is counted.
    """
    out: dict[str, list[Sample]] = {}
    go, release = CTX.Event(), CTX.Event()
    with contextlib.ExitStack() as stack:
        children: dict[str, tuple[Child, Any]] = {}
        for s in systems:
            try:
                stack.enter_context(fresh(s))
            except Exception as exc:  # noqa: BLE001
                out[s.name] = [Sample("idle CPU", None, f"error: {exc}")]
                continue
            rx, tx = CTX.Pipe(duplex=False)
            children[s.name] = (Child(_idle_consumer, s, window, tx, go, release), rx)
            tx.close()
        try:
            for name, (child, rx) in list(children.items()):
                said = None
                if rx.poll(60):
                    with contextlib.suppress(EOFError):  # it died before blocking
                        said = rx.recv()
                if said != "ready":
                    child.kill()
                    out[name] = [Sample("idle CPU", None, "error: the consumer never blocked")]
                    del children[name]
            by_name = {s.name: s for s in systems}
            server0 = {n: _server_cpu(by_name[n].server_pids()) for n in children}
            go.set()
            cpu: dict[str, float] = {}
            for name, (_child, rx) in children.items():
                if rx.poll(window + 60):
                    with contextlib.suppress(EOFError):
                        cpu[name] = rx.recv()
            server1 = {n: _server_cpu(by_name[n].server_pids()) for n in children}
        finally:
            release.set()
        for name, (child, _rx) in children.items():
            try:
                child.result(60)
            except ChildError as exc:
                out[name] = [Sample("idle CPU", None, f"error: {str(exc).splitlines()[0]}")]
                continue
            if name not in cpu:
                out[name] = [Sample("idle CPU", None, "error: no CPU figure from the consumer")]
                continue
            # per process: one that started during the window counts from zero
            server = sum(ns - server0[name].get(p, 0) for p, ns in server1[name].items()) / 1e9
            note = f"+ server {server * 10 / window:.4f} s" if server1[name] else ""
            out[name] = [Sample("idle CPU", (cpu[name] + server) * 10 / window, note)]
    return out


# ---------------------------------------------------------------- reserve latency


def _reserve_ops(system: System, ops: int, budget: float) -> dict[str, float]:
    c = system.client()
    prev = None
    for _ in range(20):  # warm the page cache and the statement cache
        prev = c.take(prev, 0)
    lat: list[float] = []
    stop = time.monotonic() + budget
    for _ in range(ops):
        if len(lat) >= 50 and time.monotonic() > stop:
            break  # a system whose reserve is O(n) would take minutes
        t0 = time.perf_counter_ns()
        prev = c.take(prev, 0)
        lat.append((time.perf_counter_ns() - t0) / 1e3)
        if prev is None:
            raise ChildError("queue ran dry during the reserve-latency run")
    c.finish(prev)
    c.close()
    return {"p50": statistics.median(lat), "p99": pct(lat, 0.99), "n": len(lat)}


def run_depth(system: System, depth: int, delayed: bool, ops: int, runs: int,
              budget: float = 5.0) -> list[list[Sample]]:
    """Build one queue of ``depth`` jobs, then ``runs`` runs of ``ops`` reserve+delete each."""
    label = f"reserve @{_short(depth)} {'delayed' if delayed else 'ready'}"
    need = ops * runs + 21 * runs + 10
    out: list[list[Sample]] = []
    with fresh(system):
        if delayed:
            build = in_child(_fill, system, depth, 0, True, timeout=1800)
            build += in_child(_fill, system, need, depth)
        else:
            build = in_child(_fill, system, depth + need, timeout=1800)
        for _ in range(runs):
            r = in_child(_reserve_ops, system, ops, budget)
            note = f"p99 {r['p99']:,.0f} µs" + (f", n={r['n']}" if r["n"] < ops else "")
            out.append([Sample(label, r["p50"], note, {"build_s": build})])
    return out


def _short(n: int) -> str:
    return f"{n // 1_000_000}M" if n >= 1_000_000 and n % 1_000_000 == 0 else f"{n // 1000}k"


# -------------------------------------------------------------------- file size


def _cycles(system: System, cycles: int) -> dict[str, float]:
    c = system.client()
    peak = 0
    seq = 0
    while seq < cycles:
        bodies = [body(i) for i in range(seq, min(seq + BATCH, cycles))]
        try:
            c.put_many(bodies)
        except NotSupported:
            for b in bodies:
                c.put(b)
        prev = None
        for _ in bodies:
            prev = c.take(prev, 0)
            if prev is None:
                raise ChildError("job missing during put/delete cycles")
        c.finish(prev)
        cleanup = getattr(c, "cleanup", None)
        if cleanup is not None:
            cleanup()  # the peer's own documented housekeeping (prune / clear_acked_data)
        seq += len(bodies)
        peak = max(peak, system.disk_bytes())
    c.close()
    return {"final": system.disk_bytes(), "peak": peak}


def run_filesize(system: System, cycles: int) -> list[Sample]:
    with fresh(system):
        r = in_child(_cycles, system, cycles, timeout=1800)
    mib = 1 << 20
    return [
        Sample(
            f"disk after {_short(cycles)} put/delete",
            r["final"] / mib,
            f"peak {r['peak'] / mib:.1f} MiB",
        )
    ]


# ------------------------------------------------------------------ sqlq work

NOOP_MODULE = "noop_tasks"
STAMP = struct.Struct("ddq")  # noop_tasks.STAMP: first call, last call, calls


def sqlq_work_available() -> str | None:
    """None when ``sqlq work`` can be benchmarked, else why not."""
    import importlib.util

    for name in ("sqlq.work.worker", "sqlq.worker"):
        try:
            if importlib.util.find_spec(name) is not None:
                return None
        except Exception:  # noqa: BLE001 - a parent package that fails to import
            continue
    return "neither sqlq.work.worker nor sqlq.worker is importable (no worker yet)"


def location(system: System) -> str:
    """A sqlq system's database: the file's path, or the PostgreSQL URL."""
    return str(getattr(system, "url", "") or system.path)  # type: ignore[attr-defined]


def _put_tasks(loc: str, n: int, sleep_ms: float) -> float:
    """n task jobs in one transaction; the time it returned (time.monotonic)."""
    os.environ["SQLQ_BENCH_DB"] = loc
    os.environ.pop("SQLQ_BENCH_STAMPS", None)
    import noop_tasks

    noop_tasks.put_many(n, sleep_ms)
    return time.monotonic()


def read_stamps(directory: str) -> tuple[int, int, float, float]:
    """(processes ready, task calls, first call, last call) from noop_tasks' files."""
    ready = calls = 0
    first, last = float("inf"), 0.0
    for name in os.listdir(directory):
        if name.startswith("ready-"):
            ready += 1
        elif name.startswith("calls-"):
            data = Path(directory, name).read_bytes()[:STAMP.size]
            if len(data) == STAMP.size:
                f0, f1, k = STAMP.unpack(data)
                calls, first, last = calls + k, min(first, f0), max(last, f1)
    return ready, calls, first, last


def _wait_for(what: str, cond: Callable[[], bool], proc: subprocess.Popen[str],
              timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        if proc.poll() is not None:
            err = (proc.stderr.read() if proc.stderr else "").strip().splitlines() or ["?"]
            raise ChildError(f"sqlq work exited {proc.returncode} before {what}: {err[-1][:150]}")
        if time.monotonic() > deadline:
            raise ChildError(f"sqlq work: no {what} within {timeout:.0f} s")
        time.sleep(0.01)


def run_sqlq_work(system: System, n: int, procs: int, sleep_ms: float = 0.0) -> list[Sample]:
    """``sqlq work --import noop_tasks --processes P`` over n task jobs (no-op, or a sleep).

    The workers start on an empty queue; once every process has imported the tasks
    (and so opened its Queue), the n jobs are put in one transaction. Rate = n / (the
    last task call's end - the put's return or the first call, whichever came first):
    no interpreter start-up, no shutdown, and every process is there from the start.
    The worker's own defaults are used (prefetch included, where it has one).
    """
    kind = f"{sleep_ms:g} ms jobs" if sleep_ms else "no-op"
    metric = f"sqlq work {kind}, {procs} proc"
    with fresh(system):
        loc = location(system)
        stamps = tempfile.mkdtemp(prefix="sqlq-bench-stamps-", dir=TMP_ROOT)
        env = dict(os.environ, SQLQ_BENCH_DB=loc, SQLQ_BENCH_STAMPS=stamps)
        env["PYTHONPATH"] = os.pathsep.join(
            p for p in (str(Path(__file__).parent), env.get("PYTHONPATH", "")) if p)
        cmd = [sys.executable, "-m", "sqlq", "--db", loc, "work", "--import", NOOP_MODULE,
               "--tube", "bench", "--processes", str(procs), "--log-level", "warning"]
        if "://" not in loc:
            cmd += ["--durability", system.durability]
        in_child(_count_left, loc)  # the schema, before several processes open the file
        proc = subprocess.Popen(cmd, env=env, stdin=subprocess.DEVNULL,
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        try:
            _wait_for("worker start", lambda: read_stamps(stamps)[0] >= procs, proc, 120)
            time.sleep(0.3)  # from the import to the first (blocking) reserve
            t_put = in_child(_put_tasks, loc, n, sleep_ms)
            _wait_for(f"{n} task calls", lambda: read_stamps(stamps)[1] >= n, proc, 900)
        finally:
            proc.terminate()
            try:
                proc.wait(60)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
            _, calls, first, last = read_stamps(stamps)
            shutil.rmtree(stamps, ignore_errors=True)
        left = in_child(_count_left, loc)
    rate = n / max(last - min(first, t_put), 1e-6)
    return [Sample(metric, rate, f"calls {calls}, left {left}", {"left": left})]


def _count_left(loc: str) -> int:
    import sqlq

    q = sqlq.Queue(loc)
    st = q.stats_tube("bench") if "bench" in q.tubes() else {}
    q.close()
    return int(sum(int(st.get(k, 0)) for k in (
        "current-jobs-ready", "current-jobs-reserved", "current-jobs-delayed",
        "current-jobs-buried")))


# ------------------------------------------------------------------- machine facts


def fsync_rate(directory: Path, seconds: float = 1.0) -> float:
    """fsyncs per second of 4 KiB appends in ``directory`` (the disk the bench uses)."""
    path = directory / f"sqlq-bench-fsync-{os.getpid()}"
    fd = os.open(path, os.O_CREAT | os.O_WRONLY | os.O_APPEND, 0o600)
    try:
        n = 0
        block = b"f" * 4096
        t0 = time.perf_counter()
        while time.perf_counter() - t0 < seconds:
            os.write(fd, block)
            os.fsync(fd)
            n += 1
        return n / (time.perf_counter() - t0)
    finally:
        os.close(fd)
        path.unlink()
