"""The table: medians of the runs, their spread, and each row's ratio to sqlq.

The ratio column ("sqlq vs it") always reads the same way: above 1 means sqlq is
better (more jobs/s, or less latency, CPU or disk), below 1 means the row beats
sqlq. Each row is compared with sqlq of the same durability class: full rows
(beanstalkd -f 0, peers at synchronous=FULL) with sqlq-full, normal and
memory-only rows with sqlq-normal. sqlq's own rows show their ratio to the raw
apsw floor of the same class in the notes.
"""

from __future__ import annotations

import re
import statistics
from dataclasses import dataclass, field


@dataclass
class Metric:
    name: str
    unit: str
    higher_is_better: bool
    fmt: str  # python format for the value


# Display order and units. A metric not listed here is shown after these, in jobs/s.
METRICS: list[Metric] = [
    Metric("put, 1 per tx", "jobs/s", True, "{:,.0f}"),
    Metric("put_many, 1000/tx", "jobs/s", True, "{:,.0f}"),
    Metric("drain, 1 process", "jobs/s", True, "{:,.0f}"),
    Metric("drain, 2 processes", "jobs/s", True, "{:,.0f}"),
    Metric("drain, 4 processes", "jobs/s", True, "{:,.0f}"),
    Metric("wake p50", "ms", False, "{:.2f}"),
    Metric("wake p99", "ms", False, "{:.2f}"),
    Metric("idle CPU", "s/10 s", False, "{:.4f}"),
]
DEPTH_UNIT = Metric("", "µs/op", False, "{:,.0f}")
DISK_UNIT = Metric("", "MiB", False, "{:.1f}")
WORK_UNIT = Metric("", "jobs/s", True, "{:,.0f}")


def metric_info(name: str) -> Metric:
    for m in METRICS:
        if m.name == name:
            return m
    if name.startswith("reserve @"):
        return Metric(name, DEPTH_UNIT.unit, False, DEPTH_UNIT.fmt)
    if name.startswith("disk after"):
        return Metric(name, DISK_UNIT.unit, False, DISK_UNIT.fmt)
    if name.startswith("horizon") and name.endswith("last/first"):
        return Metric(name, "× first", True, "{:.2f}")  # issue 28's rows (horizon.py)
    return Metric(name, WORK_UNIT.unit, True, WORK_UNIT.fmt)


def metric_order(name: str) -> tuple[int, str]:
    for i, m in enumerate(METRICS):
        if m.name == name:
            return (i, "")
    if name.startswith("reserve @"):
        size = name.split("@", 1)[1].split()[0]
        mult = 1_000_000 if size.endswith("M") else 1000
        delayed = "delayed" in name
        return (100, f"{int(delayed)}{int(size[:-1]) * mult:012d}")
    if name.startswith("disk after"):
        return (200, name)
    return (300, name)


@dataclass
class Row:
    metric: str
    system: str
    durability: str
    values: list[float]
    notes: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    @property
    def median(self) -> float | None:
        return statistics.median(self.values) if self.values else None

    @property
    def spread(self) -> float | None:
        """Half the range of the runs, as a fraction of the median."""
        m = self.median
        if m is None or len(self.values) < 2 or m == 0:
            return None
        return (max(self.values) - min(self.values)) / 2 / abs(m)

    def note(self) -> str:
        if self.errors and not self.values:
            return "error: " + self.errors[0]
        # the note of the run whose value is the median (or nearest to it)
        parts = []
        if self.notes:
            m = self.median
            if m is not None and len(self.notes) == len(self.values):
                i = min(range(len(self.values)), key=lambda k: abs(self.values[k] - m))
                parts.append(self.notes[i])
            else:
                parts.append(self.notes[0])
        if self.errors:
            parts.append(f"{len(self.errors)} run(s) failed: {self.errors[0]}")
        return "; ".join(p for p in parts if p)


def ratio(row: Row, ref: Row | None) -> float | None:
    if ref is None or row.median is None or ref.median is None or row.median == 0:
        return None
    if ref.median == 0:
        return None
    info = metric_info(row.metric)
    return ref.median / row.median if info.higher_is_better else row.median / ref.median


# The sqlq and floor rows a class is compared with: memory-only rows with normal,
# PostgreSQL rows (durable server) with sqlq and the raw psycopg floor on PostgreSQL.
REF_CLASS = {"full": "full", "normal": "normal", "memory": "normal", "pg": "pg"}


def sqlq_ref_name(durability: str) -> str:
    return f"sqlq-{REF_CLASS.get(durability, 'normal')}"


def raw_ref_name(durability: str) -> str:
    return f"raw-{REF_CLASS.get(durability, 'normal')}"


def build_table(rows: list[Row], system_order: list[str]) -> list[dict[str, str]]:
    by_key = {(r.metric, r.system): r for r in rows}
    order = {name: i for i, name in enumerate(system_order)}
    out: list[dict[str, str]] = []
    for r in sorted(rows, key=lambda r: (metric_order(r.metric), order.get(r.system, 99))):
        info = metric_info(r.metric)
        med = r.median
        notes = r.note()
        if r.system.startswith("sqlq"):
            raw = by_key.get((r.metric, raw_ref_name(r.durability)))
            if raw is not None and raw.median and med is not None:
                # sqlq / floor: throughput share of the floor, or cost as a multiple of it
                floor = f"{med / raw.median:.2f}× raw"
                notes = f"{floor}; {notes}" if notes else floor
            x_txt = "—"
        else:
            ref = by_key.get((r.metric, sqlq_ref_name(r.durability)))
            x = ratio(r, ref)
            x_txt = f"{x:.2f}" if x is not None else ""
        sp = r.spread
        out.append({
            "workload": r.metric,
            "system": r.system,
            "class": r.durability,
            "median": info.fmt.format(med) if med is not None else "n/a",
            "unit": info.unit,
            "spread": f"±{sp * 100:.0f}%" if sp is not None else "",
            "runs": str(len(r.values)),
            "sqlq vs it": x_txt,
            "notes": notes,
        })
    return out


COLUMNS = ["workload", "system", "class", "median", "unit", "spread", "runs", "sqlq vs it", "notes"]
RIGHT = {"median", "spread", "runs", "sqlq vs it"}


def text_table(table: list[dict[str, str]], notes_width: int = 60) -> str:
    widths = {c: len(c) for c in COLUMNS}
    for row in table:
        for c in COLUMNS:
            v = row[c] if c != "notes" else row[c][:notes_width]
            widths[c] = max(widths[c], len(v))
    lines = []

    def fmt(row: dict[str, str]) -> str:
        cells = []
        for c in COLUMNS:
            v = row[c] if c != "notes" else row[c][:notes_width]
            cells.append(v.rjust(widths[c]) if c in RIGHT else v.ljust(widths[c]))
        return "  ".join(cells).rstrip()

    lines.append(fmt({c: c for c in COLUMNS}))
    lines.append("  ".join("-" * widths[c] for c in COLUMNS))
    last = None
    for row in table:
        shown = dict(row)
        if row["workload"] == last:
            shown["workload"] = ""
        elif last is not None:
            lines.append("")
        last = row["workload"]
        lines.append(fmt(shown))
    return "\n".join(lines)


def markdown_table(table: list[dict[str, str]]) -> str:
    lines = ["| " + " | ".join(COLUMNS) + " |",
             "|" + "|".join("---:" if c in RIGHT else "---" for c in COLUMNS) + "|"]
    last = None
    for row in table:
        cells = [row[c].replace("|", "/") for c in COLUMNS]
        if row["workload"] == last:
            cells[0] = ""
        last = row["workload"]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


# ------------------------------------------------------------------ summaries


def _med(by_key: dict[tuple[str, str], Row], metric: str, system: str) -> float | None:
    r = by_key.get((metric, system))
    return r.median if r is not None else None


def targets(rows: list[Row]) -> list[tuple[str, str, str]]:
    """Issues 2 and 11's targets for sqlq, checked against this run: (target, measured, verdict)."""
    by_key = {(r.metric, r.system): r for r in rows}
    out: list[tuple[str, str, str]] = []

    def check(target: str, measured: str, ok: bool | None) -> None:
        out.append((target, measured, "n/a" if ok is None else ("met" if ok else "MISSED")))

    for d in ("full", "normal"):
        for metric in ("put, 1 per tx", "put_many, 1000/tx"):
            s, r = _med(by_key, metric, f"sqlq-{d}"), _med(by_key, metric, f"raw-{d}")
            if s and r:
                check(f"{metric}, {d}: ≥ 0.9× raw", f"{s:,.0f} vs {r:,.0f} = {s / r:.2f}×",
                      s / r >= 0.9)
    for d, floor in (("full", 5000), ("normal", 13000)):
        s = _med(by_key, "drain, 1 process", f"sqlq-{d}")
        if s:
            b = _med(by_key, "drain, 1 process", f"beanstalkd-{'f0' if d == 'full' else 'f50'}")
            extra = f" (beanstalkd {b:,.0f})" if b else ""
            check(f"drain 1 process, {d}: ≥ {floor:,}/s and ahead of beanstalkd",
                  f"{s:,.0f}/s{extra}", s >= floor and (b is None or s >= b))
        one, four = s, _med(by_key, "drain, 4 processes", f"sqlq-{d}")
        if one and four:
            check(f"drain 4 processes ≥ 1 process, {d}", f"{four:,.0f} vs {one:,.0f}/s",
                  four >= one)
        r = by_key.get(("drain, 4 processes", f"sqlq-{d}"))
        if r is not None and r.notes:
            check(f"drain 4 processes, {d}: exactly once, fair shares", r.note(), None)
    for d in ("full", "normal"):
        p50 = _med(by_key, "wake p50", f"sqlq-{d}")
        p99 = _med(by_key, "wake p99", f"sqlq-{d}")
        if p50 is not None and p99 is not None:
            check(f"wake, {d}: p50 ≤ 0.5 ms, p99 ≤ 2 ms", f"p50 {p50:.2f} ms, p99 {p99:.2f} ms",
                  p50 <= 0.5 and p99 <= 2.0)
        idle = _med(by_key, "idle CPU", f"sqlq-{d}")
        if idle is not None:
            check(f"idle blocked worker, {d}: ≤ 0.01 s CPU per 10 s", f"{idle:.4f} s", idle <= 0.01)
    depth = sorted((r for r in rows if r.system == "sqlq-normal"
                    and r.metric.startswith("reserve @") and r.median),
                   key=lambda r: metric_order(r.metric))
    if len(depth) >= 2 and depth[0].median:
        base = depth[0]
        worst = max(depth[1:], key=lambda r: r.median or 0)
        x = (worst.median or 0) / base.median  # type: ignore[operator]
        check("reserve cost flat (≤ 1.5×) from the smallest queue to 1M and 1M delayed",
              f"{base.metric}: {base.median:.0f} µs; worst {worst.metric}: {worst.median:.0f} µs"
              f" = {x:.2f}×", x <= 1.5)
    out += _pg_targets(by_key)
    return out


PG_PEERS = ("procrastinate", "pgqueuer")


def _pg_targets(by_key: dict[tuple[str, str], Row]) -> list[tuple[str, str, str]]:
    """Issue 11's targets for sqlq on PostgreSQL (only when sqlq-pg ran)."""
    out: list[tuple[str, str, str]] = []

    def check(target: str, measured: str, ok: bool) -> None:
        out.append((target, measured, "met" if ok else "MISSED"))

    one = _med(by_key, "drain, 1 process", "sqlq-pg")
    four = _med(by_key, "drain, 4 processes", "sqlq-pg")
    if one and four:
        check("PostgreSQL: drain 4 processes ≥ 2× 1 process",
              f"{four:,.0f} vs {one:,.0f}/s = {four / one:.2f}×", four >= 2 * one)
    for metric in ("drain, 1 process", "drain, 4 processes"):
        mine = _med(by_key, metric, "sqlq-pg")
        peers = {p: _med(by_key, metric, p) for p in PG_PEERS}
        known = {p: v for p, v in peers.items() if v}
        if mine and known:
            check(f"PostgreSQL: {metric} ahead of {' and '.join(known)}",
                  f"{mine:,.0f}/s; " + ", ".join(f"{p} {v:,.0f}/s" for p, v in known.items()),
                  all(mine > v for v in known.values()))
    p50 = _med(by_key, "wake p50", "sqlq-pg")
    if p50 is not None:
        check("PostgreSQL: wake p50 ≤ 2 ms", f"{p50:.2f} ms", p50 <= 2.0)
    idle = by_key.get(("idle CPU", "sqlq-pg"))
    if idle is not None and idle.median is not None:
        # the row is worker + server; the server's background processes are not sqlq's
        server = re.search(r"\+ server ([0-9.]+) s", idle.note())
        worker = idle.median - (float(server.group(1)) if server else 0.0)
        check("PostgreSQL: a blocked worker uses no CPU (≤ 0.01 s per 10 s, its server apart)",
              f"{worker:.4f} s ({idle.note()})", worker <= 0.01)
    return out


def summary(rows: list[Row]) -> list[str]:
    """One line per workload: sqlq against the floor and the best peer of its class."""
    by_key = {(r.metric, r.system): r for r in rows}
    lines = []
    for metric in sorted({r.metric for r in rows}, key=metric_order):
        info = metric_info(metric)
        parts = []
        for d in ("full", "normal", "pg"):
            s = by_key.get((metric, f"sqlq-{d}"))
            if s is None or s.median is None:
                continue
            peers = [r for r in rows if r.metric == metric and r.median is not None
                     and not r.system.startswith(("sqlq", "raw"))
                     and r.durability == d]
            txt = f"sqlq-{d} {info.fmt.format(s.median)} {info.unit}"
            raw = by_key.get((metric, f"raw-{d}"))
            if raw is not None and raw.median:
                txt += f" ({s.median / raw.median:.2f}× raw)"
            if peers:
                best = (max if info.higher_is_better else min)(peers, key=lambda r: r.median or 0)
                x = ratio(best, s)
                txt += (f"; best peer {best.system} {info.fmt.format(best.median)}"
                        f" (sqlq vs it {x:.2f})" if x is not None else "")
            parts.append(txt)
        if parts:
            lines.append(f"- **{metric}**: " + ". ".join(parts) + ".")
    return lines
