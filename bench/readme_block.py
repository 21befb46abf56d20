"""The figures of docs/performance.md, written from a run (``make bench`` into bench/).

The block between BEGIN and END in docs/performance.md (README.md's until issue 23) is
replaced by this run's medians: the
summary against the floor and the peers, and issue 12's rows. The prose around it
says what the figures mean and does not repeat them, so no hand-copied number can
go stale; the whole table stays in bench/RESULTS.md.
"""

from __future__ import annotations

import statistics
from pathlib import Path
from typing import Any

BEGIN = "<!-- bench:begin: written by `make bench` (bench/readme_block.py); do not edit -->"
END = "<!-- bench:end -->"

# (label, metric, format); the columns are systems, or a pair of them "a / b"
SUMMARY = [
    ("put, one per transaction (jobs/s)", "put, 1 per tx", "{:,.0f}"),
    ("put_many, 1,000 per transaction (jobs/s)", "put_many, 1000/tx", "{:,.0f}"),
    ("drain, 1 process: reserve(delete=prev) (jobs/s)", "drain, 1 process", "{:,.0f}"),
    ("drain, 4 processes (jobs/s)", "drain, 4 processes", "{:,.0f}"),
    ("wake latency p50 (ms)", "wake p50", "{:.2f}"),
    ("wake latency p99 (ms)", "wake p99", "{:.2f}"),
    ("idle blocked consumer (CPU s per 10 s)", "idle CPU", "{:.4f}"),
    ("reserve+delete at 10k ready (µs)", "reserve @10k ready", "{:,.0f}"),
    ("reserve+delete at 1M ready (µs)", "reserve @1M ready", "{:,.0f}"),
    ("after=: fan-in of 10k parents, drained until the child is ready (parents/s)",
     "deps: fan-in 10k, drain", "{:,.0f}"),
    ("after=: chain of 10k links, drained end to end (jobs/s)", "deps: chain 10k, drain",
     "{:,.0f}"),
]
COLUMNS = [("sqlq full", ["sqlq-full"]), ("sqlq normal", ["sqlq-normal"]),
           ("raw apsw floor, full / normal", ["raw-full", "raw-normal"]),
           ("beanstalkd -f 0 / -f 50", ["beanstalkd-f0", "beanstalkd-f50"]),
           ("SqliteHuey full / normal", ["huey-full", "huey-normal"])]


def _median(rows: list[dict[str, Any]], metric: str, system: str) -> float | None:
    for r in rows:
        if r["metric"] == metric and r["system"] == system and r["values"]:
            return float(statistics.median(r["values"]))
    return None


def render(data: dict[str, Any], target_lines: list[Any]) -> str:
    """The block's Markdown (BEGIN and END included) from a results dict."""
    rows = data["rows"]
    facts = data["facts"]
    out = [BEGIN, "",
           f"`{data['command']}` on {data['date'][:10]}, sqlq at {facts.get('sqlq source')},"
           f" {data['elapsed_s'] / 60:.0f} min on {facts.get('cores')} cores"
           f" (fsync {facts.get('fsync rate (/tmp, 4 KiB appends)', '?')}). Medians of the"
           " runs; spreads, notes and every peer in `bench/RESULTS.md`.", ""]
    table = []
    for label, metric, fmt in SUMMARY:
        cells = []
        for _, systems in COLUMNS:
            vals = [_median(rows, metric, s) for s in systems]
            cells.append(" / ".join(fmt.format(v) if v is not None else "–" for v in vals))
        if any(c.strip("– /") for c in cells):
            table.append(f"| {label} | " + " | ".join(cells) + " |")
    if table:
        out += ["| workload | " + " | ".join(c for c, _ in COLUMNS) + " |",
                "|---|" + "---:|" * len(COLUMNS), *table, ""]
    if target_lines:
        out += ["Issue 12's targets, each a ratio of two measurements taken side by side in"
                " every run (median, and its range over the runs):", "",
                "| row | workload | measured | range | target | verdict |",
                "|---|---|---:|---:|---|---|",
                *[f"| {ln.row} | {ln.what} | {ln.measured} | {ln.spread} | {ln.target} |"
                  f" {ln.verdict} |" for ln in target_lines], ""]
    out.append(END)
    return "\n".join(out)


def update(page: Path, block: str) -> bool:
    """Replace the block in ``page``; False (nothing written) when it has no markers."""
    text = page.read_text()
    start, end = text.find(BEGIN), text.find(END)
    if start < 0 or end < start:
        return False
    page.write_text(text[:start] + block + text[end + len(END):])
    return True
