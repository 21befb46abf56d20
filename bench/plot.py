"""The PNG next to the table: throughput per system, and reserve latency against depth."""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path
from typing import Any

from report import Row

BAR_METRICS = ["put, 1 per tx", "drain, 1 process", "drain, 4 processes"]


def plot(rows: list[Row], system_order: list[str], path: Path, title: str) -> str | None:
    """Write the PNG; returns None, or why no plot was made."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return "matplotlib is not installed"
    by_key = {(r.metric, r.system): r for r in rows}
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(15, 6.5), gridspec_kw={"width_ratios": [3, 2]})

    # left: grouped horizontal bars, one group per system
    systems = [s for s in system_order
               if any((m, s) in by_key and by_key[(m, s)].median for m in BAR_METRICS)]
    height = 0.8 / len(BAR_METRICS)
    for k, metric in enumerate(BAR_METRICS):
        ys, xs = [], []
        for i, s in enumerate(systems):
            r = by_key.get((metric, s))
            if r is not None and r.median:
                ys.append(i + (k - (len(BAR_METRICS) - 1) / 2) * height)
                xs.append(r.median)
        ax1.barh(ys, xs, height=height, label=metric)
    if not systems:
        ax1.set_axis_off()
    ax1.set_yticks(range(len(systems)))
    ax1.set_yticklabels(systems)
    ax1.invert_yaxis()
    ax1.set_xlabel("jobs/s (medians)")
    ax1.set_title("throughput (higher is better)")
    ax1.grid(axis="x", alpha=0.3)
    if systems:
        ax1.legend(loc="upper center", bbox_to_anchor=(0.5, -0.09), ncol=len(BAR_METRICS),
                   fontsize=8, frameon=False)

    # right: reserve+delete latency against queue depth
    depth_rows = [r for r in rows if r.metric.startswith("reserve @") and r.median]
    plotted = False
    for s in system_order:
        pts = []
        delayed = []
        for r in depth_rows:
            if r.system != s:
                continue
            size = r.metric.split("@", 1)[1].split()[0]
            n = int(size[:-1]) * (1_000_000 if size.endswith("M") else 1000)
            (delayed if "delayed" in r.metric else pts).append((n, r.median))
        if pts:
            pts.sort()
            line = ax2.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=s)[0]
            plotted = True
            for n, v in delayed:
                ax2.scatter([n], [v], marker="x", s=80, color=line.get_color())
    if plotted:
        ax2.set_xscale("log")
        values = [r.median for r in depth_rows if r.median]
        if max(values) / min(values) > 20:
            ax2.set_yscale("log")
        else:
            ax2.set_ylim(bottom=0)
        ax2.set_xlabel("jobs queued (x: same count, delayed)")
        ax2.set_ylabel("µs per reserve+delete (median)")
        ax2.set_title("reserve cost against depth (lower is better)")
        ax2.grid(which="both", alpha=0.3)
        ax2.legend(fontsize=8)
    else:
        ax2.set_axis_off()
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return None


def plot_targets(lines: list[Any], path: Path, title: str) -> str | None:
    """Issue 12's rows (targets.Line): each median against its target, as a multiple of the
    target (1 = exactly on it, right of 1 = met), with the range over the runs as a
    whisker. Rows without a bound (what the schema costs) are left out. Returns None, or
    why no plot was made."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return "matplotlib is not installed"
    rows = [ln for ln in lines if ln.bound and ln.ratios]
    if not rows:
        return "no target row has a value"

    def score(v: float, ln: Any) -> float:
        return v / ln.bound if ln.at_least else ln.bound / v

    fig, ax = plt.subplots(figsize=(11, 0.38 * len(rows) + 1.6))
    for i, ln in enumerate(rows):
        med = score(statistics.median(ln.ratios), ln)
        lo, hi = sorted((score(min(ln.ratios), ln), score(max(ln.ratios), ln)))
        ok = med >= 1
        ax.barh(i, med, color="#3a923a" if ok else "#c0392b", alpha=0.75)
        ax.errorbar(med, i, xerr=[[med - lo], [hi - med]], fmt="none", ecolor="black",
                    capsize=3, lw=1)
        ax.text(hi * 1.04, i, f"{ln.measured} (target {ln.target})", va="center", fontsize=7)
    ax.axvline(1.0, color="black", ls="--", lw=1)
    ax.set_xscale("log")
    ax.set_yticks(range(len(rows)))
    ax.set_yticklabels([f"{ln.row} {ln.what}"[:70] for ln in rows], fontsize=7)
    ax.invert_yaxis()
    right = max(score(max(ln.ratios), ln) for ln in rows)
    ax.set_xlim(min(0.8, *(score(min(ln.ratios), ln) * 0.8 for ln in rows)), right * 12)
    ax.set_xlabel("measured / target (log; right of the dashed line = met; whisker = range"
                  " over the runs)")
    ax.set_title(title, fontsize=9)
    ax.grid(axis="x", which="both", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return None


def main(argv: list[str]) -> int:
    """Redraw a PNG from a results.json: ``python bench/plot.py RESULTS_JSON OUT_PNG``."""
    if len(argv) != 2:
        print(main.__doc__)
        return 2
    data = json.loads(Path(argv[0]).read_text())
    rows = [Row(**r) for r in data["rows"]]
    order = list(data["versions"])
    why = plot(rows, order, Path(argv[1]), f"sqlq bench {data['date'][:10]}")
    print(why or f"wrote {argv[1]}")
    return 0 if why is None else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
