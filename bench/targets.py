"""Issue 12's targets, one row each: the ratio measured side by side, the target, met or
not, and the spread of the ratio over the runs.

A *group* measures a few *sides* (one system doing one workload) in turn, run after
run (A B C, A B C, ...), so that the machine's slow and fast moments hit every side
alike; a *goal* divides two sides of the same run, so each run gives one ratio, and
the row shows their median and their range. A goal with no denominator checks a
value against a bound (wake latency); a goal with no bound only reports (what the
schema costs).

The rows measure whatever the checked-out code does: ``sqlq work`` at its defaults
(prefetch included, once the worker has it), ``put`` from threads sharing a Queue,
``sqlq-beanstalkd`` as started by its own command line. Nothing here changes when
those paths get faster.
"""

from __future__ import annotations

import statistics
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import workloads as wl
from systems import SERVER_PROCESSES, TUBE, System

Values = dict[str, float | None]


@dataclass(frozen=True)
class Side:
    """One system doing one workload once: metric key -> value."""

    label: str
    needs: tuple[str, ...]
    measure: Callable[[], Values]


@dataclass(frozen=True)
class Goal:
    row: str          # "1a"
    what: str         # what is measured
    target: str       # the target as the issue words it
    num: str          # metric key
    den: str | None   # metric key, or None: num itself against the bound
    bound: float | None
    at_least: bool = True  # met when ratio >= bound (else <=)
    unit: str = "×"


@dataclass
class Group:
    key: str
    title: str
    sides: list[Side]
    goals: list[Goal]


@dataclass
class Results:
    """Every run's value per metric key (None where the run failed), and the errors."""

    values: dict[str, list[float | None]] = field(default_factory=dict)
    errors: dict[str, list[str]] = field(default_factory=dict)
    skipped: dict[str, str] = field(default_factory=dict)


# ------------------------------------------------------------------ measuring


def _lib_drain(loc: str, durability: str | None, n: int, loop: str, batch: int) -> float:
    """A bare library loop (loops.py) draining n jobs put beforehand: jobs/s."""
    import loops

    import sqlq

    with sqlq.Queue(loc, **_dur(loc, durability)) as q:
        for lo in range(0, n, 5000):
            q.put_many([wl.body(i) for i in range(lo, min(lo + 5000, n))])  # the loops' tube
        t0 = time.perf_counter()
        done = loops.LOOPS[loop](q, n, batch)
        took = time.perf_counter() - t0
    if done != n:
        raise wl.ChildError(f"{loop} drained {done} of {n} jobs")
    return n / took


def _dur(loc: str, durability: str | None) -> dict[str, Any]:
    return {} if "://" in loc or durability is None else {"durability": durability}


def _threads_put(loc: str, durability: str | None, n: int, threads: int) -> float:
    """``threads`` threads sharing one Queue put n jobs, one ``put`` each: jobs/s."""
    import sqlq

    q = sqlq.Queue(loc, **_dur(loc, durability))
    q.put(b"warm-up", tube="warm-up")  # schema and connection, not timed
    cuts = [n * i // threads for i in range(threads + 1)]
    start = threading.Barrier(threads + 1)
    ends: list[float] = []
    errors: list[BaseException] = []

    def putter(lo: int, hi: int) -> None:
        bodies = [wl.body(i) for i in range(lo, hi)]
        start.wait()
        try:
            for b in bodies:
                q.put(b, tube=TUBE)
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)
        ends.append(time.monotonic())

    pool = [threading.Thread(target=putter, args=(cuts[i], cuts[i + 1])) for i in range(threads)]
    for t in pool:
        t.start()
    start.wait()
    t0 = time.monotonic()
    for t in pool:
        t.join()
    q.close()
    if errors:
        raise errors[0]
    return n / (max(ends) - t0)


def _take_then_finish(system: System, n: int) -> float:
    """One job at a time in two commits (claim, then delete: ``reserve`` then
    ``job.delete()``), as a new user writes it: jobs/s."""
    c = system.client()
    t0 = time.perf_counter()
    done = 0
    while (h := c.take(None, 0)) is not None:
        c.finish(h)
        done += 1
    took = time.perf_counter() - t0
    c.close()
    if done != n:
        raise wl.ChildError(f"drained {done} of {n} jobs")
    return n / took


def run_take_then_finish(system: System, n: int) -> float:
    with wl.fresh(system):
        wl.in_child(wl._fill, system, n)
        return float(wl.in_child(_take_then_finish, system, n))


def _in_fresh(system: System, fn: Callable[..., float], *args: Any) -> float:
    """fn(location, *args) in a child, on a fresh instance of a sqlq system."""
    with wl.fresh(system):
        return float(wl.in_child(fn, wl.location(system), *args))


def _one(samples: list[wl.Sample], key: str, metric: str | None = None) -> Values:
    for s in samples:
        if metric is None or s.metric == metric:
            if s.value is None:
                raise wl.ChildError(s.notes or "no value")
            lost = s.extra.get("lost") or s.extra.get("left")
            if lost or s.extra.get("dup"):
                raise wl.ChildError(f"not exactly once: {s.notes}")
            return {key: s.value}
    raise wl.ChildError(f"no {metric} sample")


# ------------------------------------------------------------------ the plan


def plan(P: dict[str, Any], sy: dict[str, System]) -> list[Group]:
    """The groups, with sizes from the profile P and the systems by name."""

    def work(name: str, procs: int, ms: float, n: int) -> Side:
        key = f"{name}:work {procs}p {ms:g}ms"
        return Side(f"{name} `sqlq work`{f' {ms:g} ms jobs' if ms else ''}, {procs} proc",
                    (name,), lambda: _one(wl.run_sqlq_work(sy[name], n, procs, ms), key))

    def drain(name: str, n: int) -> Side:
        key = f"{name}:drain 1p"
        return Side(f"{name} drain, 1 process", (name,),
                    lambda: _one(wl.run_drain(sy[name], n, 1), key))

    def lib(name: str, loop: str, n: int, durability: str | None) -> Side:
        key = f"{name}:{loop}"
        return Side(f"{name} {loop}", (name,), lambda: {
            key: _in_fresh(sy[name], _lib_drain, durability, n, loop, 10)})

    def threads(name: str, k: int, n: int, durability: str | None) -> Side:
        key = f"{name}:put {k} threads"
        return Side(f"{name} put, {k} thread{'s' if k > 1 else ''}", (name,), lambda: {
            key: _in_fresh(sy[name], _threads_put, durability, n, k)})

    def clients(name: str, k: int, n: int) -> Side:
        def measure() -> Values:
            s = wl.run_clients(sy[name], n, k)
            return {**_one(s, f"{name}:put {k}c", s[0].metric),
                    **_one(s, f"{name}:drain {k}c", s[1].metric)}
        return Side(f"{name} put and drain, {k} client{'s' if k > 1 else ''}", (name,), measure)

    def put(name: str, n: int) -> Side:
        return Side(f"{name} put", (name,),
                    lambda: _one(wl.run_put_one(sy[name], n), f"{name}:put"))

    def take_finish(name: str, n: int) -> Side:
        return Side(f"{name} reserve, then delete", (name,),
                    lambda: {f"{name}:reserve+delete": run_take_then_finish(sy[name], n)})

    def wake(name: str) -> Side:
        def measure() -> Values:
            s = wl.run_wake(sy[name], P["wake_samples"], P["wake_budget"])
            return {f"{name}:wake p50": s[0].value, f"{name}:wake p99": s[1].value}
        return Side(f"{name} wake", (name,), measure)

    def ratio(row: str, what: str, target: str, num: str, den: str | None,
              bound: float | None, at_least: bool = True, unit: str = "×") -> Goal:
        return Goal(row, what, target, num, den, bound, at_least, unit)

    n_work, n_pause, n_lib = P["t_work_n"], P["t_pause_n"], P["t_lib_n"]
    n_put, n_drain, n_srv = P["t_put_n"], P["t_drain_n"], P["t_server_n"]
    n_pg = P["t_pg_n"]
    def server_group(row: str, k: int, who: str, clients_said: str, bound: float) -> Group:
        """sqlq-beanstalkd, one process and -P N, against beanstalkd with k clients: put
        and drain, -f 0 and -f 50 (a..d: one process; e..h: N processes)."""
        many = f"P{SERVER_PROCESSES}"
        names = ("sqlq-beanstalkd-f0", f"sqlq-beanstalkd-f0-{many}", "beanstalkd-f0",
                 "sqlq-beanstalkd-f50", f"sqlq-beanstalkd-f50-{many}", "beanstalkd-f50")
        cases = [("put", 0), ("drain", 0), ("put", 50), ("drain", 50)]
        return Group(row, f"sqlq-beanstalkd (1 and {SERVER_PROCESSES} processes) against"
                     f" beanstalkd, {who}", [clients(name, k, n_srv) for name in names], [
            ratio(f"{row}{x}", f"sqlq-beanstalkd{label} {verb}, {clients_said}, -f {f}",
                  f"≥ {bound}× beanstalkd -f {f}", f"sqlq-beanstalkd-f{f}{suffix}:{verb} {k}c",
                  f"beanstalkd-f{f}:{verb} {k}c", bound)
            for letters, label, suffix in (("abcd", "", ""),
                                           ("efgh", f" -P {SERVER_PROCESSES}", f"-{many}"))
            for x, (verb, f) in zip(letters, cases, strict=True)
        ])

    groups = [
        Group("1", "sqlq work no-op drain, 1 process, vs beanstalkd and SqliteHuey", [
            work("sqlq-full", 1, 0, n_work), drain("beanstalkd-f0", n_work),
            drain("huey-full", n_work),
            work("sqlq-normal", 1, 0, n_work), drain("beanstalkd-f50", n_work),
            drain("huey-normal", n_work),
        ], [
            ratio("1a", "`sqlq work` no-op, 1 process, full", "≥ 2× beanstalkd -f 0",
                  "sqlq-full:work 1p 0ms", "beanstalkd-f0:drain 1p", 2.0),
            ratio("1b", "`sqlq work` no-op, 1 process, normal", "≥ 2× beanstalkd -f 50",
                  "sqlq-normal:work 1p 0ms", "beanstalkd-f50:drain 1p", 2.0),
            ratio("1c", "`sqlq work` no-op, 1 process, full", "≥ 2× SqliteHuey (FULL)",
                  "sqlq-full:work 1p 0ms", "huey-full:drain 1p", 2.0),
            ratio("1d", "`sqlq work` no-op, 1 process, normal", "≥ 2× SqliteHuey (NORMAL)",
                  "sqlq-normal:work 1p 0ms", "huey-normal:drain 1p", 2.0),
        ]),
        Group("2", "sqlq work, 4 processes against 1 (full, the worker's default)", [
            work("sqlq-full", 1, 0, n_work), work("sqlq-full", 4, 0, n_work),
            work("sqlq-full", 1, 1, n_pause), work("sqlq-full", 4, 1, n_pause),
        ], [
            ratio("2a", "`sqlq work` no-op, 4 processes vs 1, full", "≥ 1× 1 process",
                  "sqlq-full:work 4p 0ms", "sqlq-full:work 1p 0ms", 1.0),
            ratio("2b", "`sqlq work` 1 ms jobs, 4 processes vs 1, full", "≥ 3.5× 1 process",
                  "sqlq-full:work 4p 1ms", "sqlq-full:work 1p 1ms", 3.5),
        ]),
        Group("3", "library reserve_many(10) + delete_many against one at a time", [
            lib("sqlq-normal", "reserve(delete=job)", n_lib, "normal"),
            lib("sqlq-normal", "reserve_many+delete_many", n_lib, "normal"),
            lib("sqlq-full", "reserve(delete=job)", n_lib, "full"),
            lib("sqlq-full", "reserve_many+delete_many", n_lib, "full"),
        ], [
            ratio("3a", "reserve_many(10) + delete_many vs reserve(delete=job), normal",
                  "≥ 5×", "sqlq-normal:reserve_many+delete_many",
                  "sqlq-normal:reserve(delete=job)", 5.0),
            ratio("3b", "reserve_many(10) + delete_many vs reserve(delete=job), full",
                  "≥ 5×", "sqlq-full:reserve_many+delete_many",
                  "sqlq-full:reserve(delete=job)", 5.0),
        ]),
        Group("4", "put, 8 threads sharing a Queue, against one thread (full)", [
            threads("sqlq-full", 1, n_put, "full"), threads("sqlq-full", 8, n_put, "full"),
        ], [
            ratio("4", "put, 8 threads sharing a Queue vs 1 thread, full", "≥ 3×",
                  "sqlq-full:put 8 threads", "sqlq-full:put 1 threads", 3.0),
        ]),
        server_group("5", 8, "8 greenstalk clients (processes)", "8 clients", 1.0),
        server_group("6", 1, "1 greenstalk client", "1 client", 0.6),
        Group("7", "single put / one-at-a-time drain against a bare apsw loop", [
            side for d in ("full", "normal") for side in (
                put(f"sqlq-{d}", n_put), put(f"raw-{d}", n_put), put(f"raw-minimal-{d}", n_put),
                take_finish(f"sqlq-{d}", n_drain), take_finish(f"raw-{d}", n_drain),
                take_finish(f"raw-minimal-{d}", n_drain))
        ], [
            goal for d, (a, b, c, e) in (("full", "abcd"), ("normal", "efgh")) for goal in (
                ratio(f"7{a}", f"put, one per transaction, {d}",
                      "≥ 0.9× apsw, same schema", f"sqlq-{d}:put", f"raw-{d}:put", 0.9),
                ratio(f"7{b}", f"reserve, then job.delete(), {d}", "≥ 0.9× apsw, same schema",
                      f"sqlq-{d}:reserve+delete", f"raw-{d}:reserve+delete", 0.9),
                ratio(f"7{c}", f"the schema's cost: apsw put on sqlq's schema / on a minimal"
                      f" one, {d}", "(reported; < 1: the schema costs)", f"raw-{d}:put",
                      f"raw-minimal-{d}:put", None),
                ratio(f"7{e}", f"the schema's cost: apsw reserve, then delete, on sqlq's schema"
                      f" / on a minimal one, {d}", "(reported; < 1: the schema costs)",
                      f"raw-{d}:reserve+delete", f"raw-minimal-{d}:reserve+delete", None))
        ]),
        Group("8", "wake latency (normal)", [wake("sqlq-normal")], [
            ratio("8a", "wake p50, normal", "≤ 0.5 ms", "sqlq-normal:wake p50", None, 0.5,
                  False, " ms"),
            ratio("8b", "wake p99, normal", "≤ 2 ms", "sqlq-normal:wake p99", None, 2.0,
                  False, " ms"),
        ]),
        # PostgreSQL: the rows that apply, sqlq-pg against the PostgreSQL peers and floor
        Group("1pg", "PostgreSQL: sqlq work no-op drain, 1 process, vs its peers", [
            work("sqlq-pg", 1, 0, n_pg), drain("pgqueuer", n_pg), drain("procrastinate", n_pg),
        ], [
            ratio("1pg-a", "PostgreSQL `sqlq work` no-op, 1 process", "≥ 1× pgqueuer (issue 11)",
                  "sqlq-pg:work 1p 0ms", "pgqueuer:drain 1p", 1.0),
            ratio("1pg-b", "PostgreSQL `sqlq work` no-op, 1 process",
                  "≥ 1× procrastinate (issue 11)", "sqlq-pg:work 1p 0ms",
                  "procrastinate:drain 1p", 1.0),
        ]),
        Group("2pg", "PostgreSQL: sqlq work 1 ms jobs, 4 processes against 1", [
            work("sqlq-pg", 1, 1, n_pg), work("sqlq-pg", 4, 1, n_pg),
        ], [
            ratio("2pg", "PostgreSQL `sqlq work` 1 ms jobs, 4 processes vs 1", "≥ 3.5×",
                  "sqlq-pg:work 4p 1ms", "sqlq-pg:work 1p 1ms", 3.5),
        ]),
        Group("3pg", "PostgreSQL: library reserve_many(10) + delete_many against one at a time", [
            lib("sqlq-pg", "reserve(delete=job)", n_pg, None),
            lib("sqlq-pg", "reserve_many+delete_many", n_pg, None),
        ], [
            ratio("3pg", "PostgreSQL reserve_many(10) + delete_many vs reserve(delete=job)",
                  "≥ 5×", "sqlq-pg:reserve_many+delete_many", "sqlq-pg:reserve(delete=job)",
                  5.0),
        ]),
        Group("4pg", "PostgreSQL: put, 8 threads sharing a Queue, against one thread", [
            threads("sqlq-pg", 1, n_pg, None), threads("sqlq-pg", 8, n_pg, None),
        ], [
            ratio("4pg", "PostgreSQL put, 8 threads sharing a Queue vs 1 thread", "≥ 3×",
                  "sqlq-pg:put 8 threads", "sqlq-pg:put 1 threads", 3.0),
        ]),
        Group("7pg", "PostgreSQL: single put / one-at-a-time drain against raw psycopg", [
            put("sqlq-pg", n_pg), put("raw-pg", n_pg),
            take_finish("sqlq-pg", n_pg), take_finish("raw-pg", n_pg),
        ], [
            ratio("7pg-a", "PostgreSQL put, one per transaction", "≥ 0.9× raw psycopg",
                  "sqlq-pg:put", "raw-pg:put", 0.9),
            ratio("7pg-b", "PostgreSQL reserve, then job.delete()", "≥ 0.9× raw psycopg",
                  "sqlq-pg:reserve+delete", "raw-pg:reserve+delete", 0.9),
        ]),
        Group("8pg", "PostgreSQL: wake latency", [wake("sqlq-pg")], [
            ratio("8pg-a", "PostgreSQL wake p50", "≤ 2 ms (issue 11)", "sqlq-pg:wake p50", None,
                  2.0, False, " ms"),
            ratio("8pg-b", "PostgreSQL wake p99", "(reported)", "sqlq-pg:wake p99", None, None,
                  False, " ms"),
        ]),
    ]
    return groups


GROUP_KEYS = ["1", "2", "3", "4", "5", "6", "7", "8", "1pg", "2pg", "3pg", "4pg", "7pg", "8pg"]


def run(groups: list[Group], runs: int, available: dict[str, System],
        why_not: dict[str, str], log: Callable[[str], None]) -> Results:
    """Each group's sides in turn, ``runs`` times; a side that fails keeps None for that run."""
    res = Results()
    for g in groups:
        missing = sorted({n for s in g.sides for n in s.needs if n not in available})
        if missing:
            res.skipped[g.key] = "; ".join(f"{n}: {why_not.get(n, 'not available')}"
                                           for n in missing)
            log(f"\n== [{g.key}] {g.title}: SKIPPED ({res.skipped[g.key]})")
            continue
        log(f"\n== [{g.key}] {g.title}: {runs} runs, sides interleaved")
        t0 = time.monotonic()
        keys = {goal.num for goal in g.goals} | {goal.den for goal in g.goals if goal.den}
        for i in range(runs):
            got: Values = {}
            for side in g.sides:
                try:
                    vals = side.measure()
                except Exception as exc:  # noqa: BLE001 - one failing side must not stop the run
                    msg = str(exc).strip().splitlines()[0][:160] if str(exc).strip() else \
                        type(exc).__name__
                    log(f"    run {i + 1}  {side.label:58} ERROR {msg}")
                    res.errors.setdefault(side.label, []).append(msg)
                    continue
                got.update(vals)
                shown = ", ".join(f"{k.split(':', 1)[1]} {_fmt(v)}" for k, v in vals.items())
                log(f"    run {i + 1}  {side.label:58} {shown}")
            for k in keys:  # a group's own keys: two groups may measure the same side
                res.values.setdefault(f"{g.key}|{k}", []).append(got.get(k))
        log(f"    ({time.monotonic() - t0:.0f} s)")
    return res


def _fmt(v: float | None) -> str:
    if v is None:
        return "n/a"
    return f"{v:,.0f}" if v >= 100 else f"{v:.2f}"


# ------------------------------------------------------------------ the table


@dataclass
class Line:
    row: str
    what: str
    measured: str
    spread: str
    runs: int
    target: str
    verdict: str
    sides: str
    ratios: list[float]
    bound: float | None
    at_least: bool


def lines(goals: list[tuple[str, Goal]], all_values: dict[str, list[float | None]],
          skipped: dict[str, str]) -> list[Line]:
    """One line per goal whose values exist: median ratio, its range, the verdict."""
    out = []
    for key, g in goals:
        values = {k.split("|", 1)[1]: v for k, v in all_values.items()
                  if k.split("|", 1)[0] == key}
        nums = values.get(g.num)
        dens = values.get(g.den) if g.den else [1.0] * len(nums or [])
        if not nums or dens is None:
            continue
        ratios = [a / b for a, b in zip(nums, dens, strict=True) if a is not None and b]
        if not ratios:
            out.append(Line(g.row, g.what, "n/a", "", 0, g.target, "n/a (every run failed)",
                            "", [], g.bound, g.at_least))
            continue
        med = statistics.median(ratios)
        lo, hi = min(ratios), max(ratios)
        if g.bound is None:
            verdict = "—"
        else:
            ok = meets(med, g.bound, g.at_least)
            every = all(meets(r, g.bound, g.at_least) for r in ratios)
            verdict = ("met" if ok else "MISSED") + ("" if every or not ok else
                                                     " (not in every run)")
        fmt = "{:.2f}"
        sides = [f"{k.replace(':', ' ')} {_fmt(_median(values[k]))}" for k in (g.num, g.den) if k]
        out.append(Line(g.row, g.what, fmt.format(med) + g.unit,
                        f"{fmt.format(lo)}–{fmt.format(hi)}", len(ratios), g.target, verdict,
                        "; ".join(sides), ratios, g.bound, g.at_least))
    return out


def meets(value: float, bound: float, at_least: bool) -> bool:
    return value >= bound if at_least else value <= bound


def _median(vs: list[float | None]) -> float | None:
    real = [v for v in vs if v is not None]
    return statistics.median(real) if real else None


COLUMNS = [("row", "row"), ("what", "workload"), ("measured", "median"),
           ("spread", "min–max over runs"), ("runs", "runs"), ("target", "target"),
           ("verdict", "verdict"), ("sides", "medians of the sides (jobs/s, or ms)")]


def markdown(ls: list[Line], skipped: dict[str, str]) -> list[str]:
    md = ["| " + " | ".join(h for _, h in COLUMNS) + " |",
          "|---|---|---:|---:|---:|---|---|---|"]
    for ln in ls:
        md.append("| " + " | ".join(str(getattr(ln, a)).replace("|", "/") for a, _ in COLUMNS)
                  + " |")
    md += [f"- group {k} skipped: {why}" for k, why in skipped.items()]
    return md


def text(ls: list[Line], skipped: dict[str, str]) -> str:
    cols = [(a, h) for a, h in COLUMNS if a != "sides"]
    width = {a: max(len(h), *(len(str(getattr(ln, a))) for ln in ls)) for a, h in cols} \
        if ls else {a: len(h) for a, h in cols}
    out = ["  ".join(h.ljust(width[a]) for a, h in cols).rstrip()]
    for ln in ls:
        out.append("  ".join(str(getattr(ln, a)).ljust(width[a]) for a, _ in cols).rstrip())
    out += [f"group {k} skipped: {why}" for k, why in skipped.items()]
    return "\n".join(out)


def all_goals() -> list[tuple[str, Goal]]:
    """Every goal, for rebuilding the table from a results.json (no systems needed)."""
    sizes = {k: 1 for k in ("t_work_n", "t_pause_n", "t_lib_n", "t_put_n", "t_drain_n",
                            "t_server_n", "t_pg_n", "wake_samples", "wake_budget")}
    return [(g.key, goal) for g in plan(sizes, {}) for goal in g.goals]
