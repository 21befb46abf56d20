"""sqlq side by side with its peers, in one run: ``make bench`` / ``make bench-quick``.

    .venv/bin/python bench/run.py [--quick] [--systems sqlq,raw,...] [--workloads put,drain,...]

Started from any Python, it builds .venv-bench (see env.py) and re-executes
itself there. Prints one table (medians of several runs, spread, ratio to
sqlq) and writes RESULTS.md and results.png (the full run into bench/, the
quick run into bench/.work/quick/, unless --out says otherwise) and every run's
value to results.json (bench/.work/, not committed, or --out).
bench/README.md explains the workloads and the fairness choices.
"""

from __future__ import annotations

import argparse
import atexit
import datetime as dt
import fnmatch
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any, cast

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

import env  # noqa: E402

WORKLOADS = ["put", "put_many", "drain", "wake", "idle", "depth", "filesize", "deps", "groups",
             "horizon", "targets"]

PROFILES: dict[str, dict[str, object]] = {
    "full": {  # about 20-25 minutes on 2 cores, 8-10 of them the PostgreSQL systems
        "runs": 5, "put_n": 5000, "put_many_n": 100_000,
        "drain_n": 4000, "drain_runs": 5, "drain_procs": [1, 2, 4],
        "wake_samples": 150, "wake_budget": 2.5, "wake_runs": 3,
        "idle_window": 10.0, "idle_runs": 3,
        "depths": [10_000, 100_000, 1_000_000], "delayed": 1_000_000, "peer_depth_max": 100_000,
        "depth_ops": 1000, "depth_runs": 3, "depth_budget": 4.0,
        "cycles": 50_000,
        # issue 24's rows (deps.py): a fan-in and a chain of each size, and the runs
        "deps_sizes": [1000, 10_000], "deps_runs": 3,
        # issue 38's rows (groups.py): the worker's loop with 10,000 groups and without
        "groups_n": 20_000, "groups_count": 10_000, "groups_runs": 3,
        # issue 28's rows (horizon.py): drains with and without a held snapshot, both backends
        "horizon_sizes": [20_000], "horizon_runs": 2, "horizon_loops": ["fast"],
        # issue 12's rows (targets.py): jobs per run of each side, and the runs
        "targets_runs": 3, "t_work_n": 5000, "t_pause_n": 1000, "t_lib_n": 5000,
        "t_put_n": 3000, "t_drain_n": 3000, "t_server_n": 2000, "t_pg_n": 1000,
    },
    "quick": {  # about 3 minutes
        "runs": 3, "put_n": 1000, "put_many_n": 20_000,
        "drain_n": 1500, "drain_runs": 1, "drain_procs": [1, 4],
        "wake_samples": 40, "wake_budget": 1.0, "wake_runs": 1,
        "idle_window": 5.0, "idle_runs": 1,
        "depths": [10_000, 100_000], "delayed": 100_000, "peer_depth_max": 0,
        "depth_ops": 200, "depth_runs": 2, "depth_budget": 2.0,
        "cycles": 5000,
        "deps_sizes": [1000], "deps_runs": 1,
        "groups_n": 10_000, "groups_count": 10_000, "groups_runs": 1,
        "horizon_sizes": [5000], "horizon_runs": 1, "horizon_loops": ["fast"],
        "targets_runs": 2, "t_work_n": 1000, "t_pause_n": 300, "t_lib_n": 1000,
        "t_put_n": 500, "t_drain_n": 500, "t_server_n": 400, "t_pg_n": 200,
    },
}

# Which systems each workload runs (by name; absent systems are skipped).
NORMAL_PEERS = ["beanstalkd-f50", "huey-normal", "persist-queue-normal", "litequeue-normal"]
DEPTH_SYSTEMS = ["sqlq-normal", "raw-normal", *NORMAL_PEERS]
FILESIZE_SYSTEMS = ["sqlq-normal", "raw-normal", *NORMAL_PEERS]
DEPS_SYSTEMS = ["sqlq-normal", "sqlq-pg"]  # no peer has dependencies of this kind
# the systems with a batched put
BATCH_FAMILIES = {"sqlq", "raw", "raw-pg", "procrastinate", "pgqueuer"}
FSYNC = "fsync rate (/tmp, 4 KiB appends)"


def log(msg: str) -> None:
    print(msg, flush=True)


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--quick", action="store_true", help="the three-minute version")
    p.add_argument("--systems", default="", help="comma-separated names or globs (sqlq*,raw*)")
    p.add_argument("--workloads", default="", help="comma-separated: " + ",".join(WORKLOADS))
    p.add_argument("--runs", type=int, default=0, help="override the number of runs")
    p.add_argument("--targets", default="",
                   help="issue 12's rows to run (workload targets), comma-separated group keys,"
                   " default all: 1,2,3,4,5,6,7,8,1pg,2pg,3pg,4pg,7pg,8pg")
    p.add_argument("--out", default="", help="directory for RESULTS.md/results.png/json")
    p.add_argument("--no-install", action="store_true", help="do not apt-get install beanstalkd")
    p.add_argument("--retry-honker", action="store_true", help="try pip install honker again")
    p.add_argument("--report-only", metavar="RESULTS_JSON", default="",
                   help="rebuild RESULTS.md and the PNG from a results.json, measure nothing")
    return p.parse_args(argv)


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    if args.report_only and env.in_bench_venv():
        return report_only(args.report_only, args.out)
    if not env.in_bench_venv():
        env.ensure_venv(log, retry_honker=args.retry_honker)
        env.reexec_in_venv(argv)  # does not return
    return bench(args, argv)


def snapshot_sqlq() -> str:
    """Copy sqlq/ and migrations/ (read beside the package, as in a checkout) to a temp
    dir first on sys.path; describe the source.

    The bench then measures one consistent version even while sqlq/ is being
    edited (forked workers and `sqlq work` subprocesses all import the copy).
    """
    snap = Path(tempfile.mkdtemp(prefix="sqlq-bench-src-"))
    atexit.register(shutil.rmtree, snap, True)
    for folder in ("sqlq", "migrations"):
        shutil.copytree(env.ROOT / folder, snap / folder,
                        ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    sys.path.insert(0, str(snap))
    os.environ["PYTHONPATH"] = os.pathsep.join(
        p for p in (str(snap), os.environ.get("PYTHONPATH", "")) if p)

    def git(*a: str) -> str:
        r = subprocess.run(["git", "-C", str(env.ROOT), *a], capture_output=True, text=True)
        return r.stdout.strip() if r.returncode == 0 else ""

    commit = git("rev-parse", "--short", "HEAD") or "no commit"
    dirty = git("status", "--porcelain", "--", "sqlq", "migrations")
    return f"{commit}" + (" + uncommitted changes in sqlq/ or migrations/" if dirty else "")


def bench(args: argparse.Namespace, argv: list[str]) -> int:
    source = snapshot_sqlq()
    import report
    import workloads as wl
    from lineup import all_systems

    t_start = time.monotonic()
    profile = dict(PROFILES["quick" if args.quick else "full"])
    if args.runs:
        for k in list(profile):
            if k.endswith("runs"):
                profile[k] = args.runs
    selected = [w.strip() for w in args.workloads.split(",") if w.strip()] or WORKLOADS
    unknown = set(selected) - set(WORKLOADS)
    if unknown:
        log(f"unknown workload(s): {', '.join(sorted(unknown))}; known: {', '.join(WORKLOADS)}")
        return 2
    out_dir = Path(args.out) if args.out else (HERE / ".work" / "quick" if args.quick else HERE)
    out_dir.mkdir(parents=True, exist_ok=True)

    bs_path, bs_note = env.ensure_beanstalkd(log, install=not args.no_install)
    systems = all_systems(bs_path, bs_note, env.honker_note())
    registry = list(systems)  # the targets' rows use systems the table may leave out
    pats = [p.strip() for p in args.systems.split(",") if p.strip()]
    skipped: dict[str, str] = {}
    for s in [s for s in systems if not s.default and s.mention_off and s.name not in pats]:
        # a slot waiting for its code (sqlq-pg): only an exact name turns it on
        if not pats or any(fnmatch.fnmatch(s.name, p) or p == s.family for p in pats):
            skipped[s.name] = (f"off by default in the table (issue 12's rows use it): name"
                               f" it in --systems ({s.name}) to add it")
    systems = [s for s in systems if s.name in pats or (
        s.default and (not pats or any(fnmatch.fnmatch(s.name, p) or p == s.family
                                       for p in pats)))]
    live = []
    for s in systems:
        why = s.unavailable()
        if why:
            skipped[s.name] = why
        else:
            live.append(s)
    order = [s.name for s in live]

    facts = env.machine_facts()
    facts["sqlq source"] = source
    fsync_start = wl.fsync_rate(wl.TMP_ROOT)
    facts[FSYNC] = f"{fsync_start:,.0f}/s"
    versions = {s.name: s.version() for s in live}
    log(f"\nsqlq bench ({'quick' if args.quick else 'full'}), {dt.datetime.now():%Y-%m-%d %H:%M}")
    for k, v in facts.items():
        log(f"  {k}: {v}")
    log("systems:")
    for s in live:
        log(f"  {s.name:22} {versions[s.name]}   [blocked consumer: {s.wait}]")
    for name, why in skipped.items():
        log(f"  SKIPPED {name}: {why}")

    rows: dict[tuple[str, str], report.Row] = {}
    by_name = {s.name: s for s in live}
    every = {s.name: s for s in registry}  # issue 28's rows run sqlq-pg even when off

    def record(system_name: str, samples: list[wl.Sample]) -> None:
        s = by_name.get(system_name) or every[system_name]
        for smp in samples:
            row = rows.setdefault((smp.metric, s.name),
                                  report.Row(smp.metric, s.name, s.durability, []))
            if smp.value is None:
                row.errors.append(smp.notes or "no value")
            else:
                row.values.append(smp.value)
                row.notes.append(smp.notes)
            info = report.metric_info(smp.metric)
            val = info.fmt.format(smp.value) if smp.value is not None else "n/a"
            log(f"    {s.name:22} {smp.metric:26} {val:>12} {info.unit:7} {smp.notes[:70]}")

    def fail(system_name: str, metric: str, exc: BaseException) -> None:
        s = by_name[system_name]
        msg = str(exc).strip().splitlines()[0][:160] if str(exc).strip() else type(exc).__name__
        rows.setdefault((metric, s.name), report.Row(metric, s.name, s.durability, [])) \
            .errors.append(msg)
        log(f"    {s.name:22} {metric:26}        ERROR {msg}")
        detail = str(exc).strip().splitlines()[1:]
        if detail:
            log("      " + "\n      ".join(detail[-6:]))

    def repeat(metric: str, names: list[str], runs: int, fn, *a) -> None:  # type: ignore[no-untyped-def]
        """Run i of every system, then run i+1 of every system: the systems share
        the machine's slow and fast moments (fsync latency drifts on a shared VM)."""
        failed: set[str] = set()
        for _ in range(runs):
            for name in names:
                if name not in by_name or name in failed:
                    continue
                try:
                    record(name, fn(by_name[name], *a))
                except Exception as exc:  # noqa: BLE001 - one failing peer must not stop the run
                    fail(name, metric, exc)
                    failed.add(name)

    P = profile
    runs = int(P["runs"])  # type: ignore[arg-type]
    if "put" in selected:
        log(f"\n== put, one per transaction: {P['put_n']} jobs x {runs} runs")
        repeat("put, 1 per tx", order, runs, wl.run_put_one, P["put_n"])
    if "put_many" in selected:
        names = [s.name for s in live if s.family in BATCH_FAMILIES]
        log(f"\n== put_many, {wl.BATCH} per transaction: {P['put_many_n']} jobs x {runs} runs"
            " (systems without a batched put skip it)")
        repeat("put_many, 1000/tx", names, runs, wl.run_put_many, P["put_many_n"])
    if "drain" in selected:
        for procs in P["drain_procs"]:  # type: ignore[attr-defined]
            log(f"\n== drain {P['drain_n']} jobs with {procs} process(es) x {P['drain_runs']} runs")
            repeat(f"drain, {procs} process{'es' if procs > 1 else ''}", order,
                   int(P["drain_runs"]), wl.run_drain, P["drain_n"], procs)  # type: ignore[arg-type]
    if "wake" in selected:
        log(f"\n== wake latency: up to {P['wake_samples']} jobs or {P['wake_budget']} s"
            f" x {P['wake_runs']} runs (producer and blocked consumer in two processes)")
        repeat("wake p50", order, int(P["wake_runs"]), wl.run_wake,  # type: ignore[arg-type]
               P["wake_samples"], P["wake_budget"])
    if "idle" in selected:
        log(f"\n== idle CPU of a blocked consumer over {P['idle_window']} s"
            f" (all systems side by side) x {P['idle_runs']} runs")
        for _ in range(int(P["idle_runs"])):  # type: ignore[arg-type]
            for name, samples in wl.run_idle_all(live, float(P["idle_window"])).items():  # type: ignore[arg-type]
                record(name, samples)
    if "depth" in selected:
        depth_jobs: list[tuple[int, bool]] = [(d, False) for d in P["depths"]]  # type: ignore[attr-defined]
        if P["delayed"]:
            depth_jobs.append((int(P["delayed"]), True))  # type: ignore[arg-type]
        log(f"\n== reserve+delete latency against depth: {P['depth_ops']} ops x"
            f" {P['depth_runs']} runs per queue (built with put_many, durability normal)")
        for depth, delayed in depth_jobs:
            for name in DEPTH_SYSTEMS:
                if name not in by_name:
                    continue
                s = by_name[name]
                if s.family not in BATCH_FAMILIES and (delayed or depth > int(P["peer_depth_max"])):  # type: ignore[arg-type]
                    continue
                label = f"reserve @{wl._short(depth)} {'delayed' if delayed else 'ready'}"
                try:
                    for samples in wl.run_depth(s, depth, delayed, int(P["depth_ops"]),  # type: ignore[arg-type]
                                                int(P["depth_runs"]),  # type: ignore[arg-type]
                                                float(P["depth_budget"])):  # type: ignore[arg-type]
                        record(name, samples)
                except Exception as exc:  # noqa: BLE001
                    fail(name, label, exc)
    if "filesize" in selected:
        log(f"\n== file size after {P['cycles']:,} put/delete cycles (batches of {wl.BATCH})")
        metric = f"disk after {wl._short(int(P['cycles']))} put/delete"  # type: ignore[arg-type]
        repeat(metric, FILESIZE_SYSTEMS, 1, wl.run_filesize, P["cycles"])
    if "deps" in selected:
        import deps

        log(f"\n== dependencies (after=): a fan-in and a chain of {P['deps_sizes']} jobs"
            f" x {P['deps_runs']} runs (durability normal; sqlq-pg when named)")
        repeat("deps", [n for n in DEPS_SYSTEMS if n in by_name], int(P["deps_runs"]),  # type: ignore[arg-type]
               deps.run_deps, P["deps_sizes"])
    if "groups" in selected:
        import groups

        log(f"\n== groups: the worker's loop over {P['groups_n']:,} jobs in {P['groups_count']:,}"
            f" groups and in none x {P['groups_runs']} runs (durability normal; sqlq-pg when"
            f" named)")
        repeat("groups", [n for n in DEPS_SYSTEMS if n in by_name], int(P["groups_runs"]),  # type: ignore[arg-type]
               groups.run_groups, P["groups_n"], P["groups_count"])
    if "horizon" in selected:
        import horizon

        h_sizes = cast(list[int], P["horizon_sizes"])
        h_loops = cast(list[str], P["horizon_loops"])
        h_runs = cast(int, P["horizon_runs"])
        log(f"\n== issue 28: drain {h_sizes} jobs one at a time"
            f" ({', '.join(horizon.LOOPS[k] for k in h_loops)}), with and without a snapshot"
            f" held from before the puts, SQLite and PostgreSQL (durability normal)"
            f" x {h_runs} runs")
        results = horizon.run_all([horizon.Tree(None, source)], h_sizes, horizon.BACKENDS,
                                  ["none", "snapshot"], h_loops, h_runs, "normal", log)
        for name, samples in horizon.samples(results).items():
            record(name, samples)
        log("\n" + horizon.table(results))
    target_results = None
    if "targets" in selected:
        target_results = run_targets(args, profile, registry)

    fsync_end = wl.fsync_rate(wl.TMP_ROOT)
    facts[FSYNC] = f"{fsync_start:,.0f}/s at the start, {fsync_end:,.0f}/s at the end"
    cmd = "make bench-quick" if args.quick else "make bench"
    if argv:
        cmd = "bench/run.py " + " ".join(argv)
    data = {
        "date": dt.datetime.now().isoformat(timespec="seconds"), "command": cmd,
        "quick": bool(args.quick), "elapsed_s": time.monotonic() - t_start,
        "profile": profile, "facts": facts, "versions": versions, "skipped": skipped,
        "systems": [{"name": s.name, "durability": s.durability, "wait": s.wait} for s in live],
        "rows": [asdict(r) for r in rows.values()],
        "targets": asdict(target_results) if target_results is not None else None,
    }
    # next to RESULTS.md, except in bench/ itself where only RESULTS.md and the PNG are kept
    json_path = (HERE / ".work" if out_dir.resolve() == HERE else out_dir) / "results.json"
    json_path.parent.mkdir(parents=True, exist_ok=True)
    json_path.write_text(json.dumps(data, indent=1, default=str))
    finish(data, out_dir)
    log(f"every run's value: {json_path}")
    return 0


def run_targets(args: argparse.Namespace, profile: dict[str, Any], registry: list[Any]) -> Any:
    """Issue 12's rows (targets.py), on every system they need, selected or not."""
    import targets

    available, why_not = {}, {}
    for s in registry:
        why = s.unavailable()
        if why:
            why_not[s.name] = why
        else:
            available[s.name] = s
    keys = [k.strip() for k in args.targets.split(",") if k.strip()] or targets.GROUP_KEYS
    unknown = set(keys) - set(targets.GROUP_KEYS)
    if unknown:
        log(f"unknown target group(s) {', '.join(sorted(unknown))}; known: "
            + ",".join(targets.GROUP_KEYS))
    groups = [g for g in targets.plan(profile, available) if g.key in keys]
    return targets.run(groups, int(profile["targets_runs"]), available, why_not, log)


def finish(data: dict[str, Any], out_dir: Path) -> None:
    """Print the table; write RESULTS.md and results.png into out_dir (from a results dict)."""
    import plot
    import report

    rows = [report.Row(**r) for r in data["rows"]]
    order = [s["name"] for s in data["systems"]]
    table = report.build_table(rows, order)
    if table:
        log("\n" + report.text_table(table, notes_width=70))
        log("\nsqlq vs it: > 1 means sqlq is better (faster, or less latency/CPU/disk), compared"
            " with sqlq of the same durability class; sqlq rows show their ratio to the raw apsw"
            " floor.")
    facts = data["facts"]
    title = (f"sqlq bench ({'quick' if data['quick'] else 'full'}) {data['date'][:10]}: "
             f"{facts.get('cores')} cores, {facts.get('cpu', '?')}, fsync {facts.get(FSYNC)}")
    png = out_dir / "results.png"
    try:  # (a run of issue 12's rows alone has no table to draw)
        why_no_plot = plot.plot(rows, order, png, title) if rows else "no table rows"
    except Exception as exc:  # noqa: BLE001 - a plot problem must not lose the table
        why_no_plot = f"plot failed: {type(exc).__name__}: {exc}"
    goal_lines, goals_md, goals_png = finish_targets(data, out_dir, title)
    md = results_markdown(data, table, rows, png if why_no_plot is None else None)
    (out_dir / "RESULTS.md").write_text(md.replace(TARGETS_SLOT, "\n".join(goals_md)))
    log(f"\nwrote {out_dir / 'RESULTS.md'}, {png if why_no_plot is None else why_no_plot}"
        f"{', ' + goals_png if goals_png else ''} ({data['elapsed_s'] / 60:.1f} min)")
    if out_dir.resolve() == HERE:  # docs/performance.md quotes whatever bench/RESULTS.md holds
        import readme_block

        page = env.ROOT / "docs" / "performance.md"
        if readme_block.update(page, readme_block.render(data, goal_lines)):
            log(f"wrote the figures of docs/performance.md ({page})")


TARGETS_SLOT = "<!-- issue 12 rows -->"


def finish_targets(data: dict[str, Any], out_dir: Path,
                   title: str) -> tuple[list[Any], list[str], str]:
    """Print issue 12's table; its lines, its Markdown section and its PNG (or why not)."""
    import plot
    import targets

    res = data.get("targets")
    if not res:
        return [], [], ""
    lines = targets.lines(targets.all_goals(), res["values"], res["skipped"])
    log("\nissue 12's targets: the ratio per run, its median and range (sides interleaved)\n"
        + targets.text(lines, res["skipped"]))
    png = out_dir / "targets.png"
    try:
        why = plot.plot_targets(lines, png, title)
    except Exception as exc:  # noqa: BLE001 - a plot problem must not lose the table
        why = f"plot failed: {type(exc).__name__}: {exc}"
    md = ["## Issue 12's targets, side by side", "",
          "Each row divides two measurements taken in the same run (the sides, run one",
          "after the other, run after run), so each run gives one ratio: the median of",
          "those ratios, their range, and the verdict on the median (\"not in every run\"",
          "when some runs fell short). The sides' medians are jobs/s, or ms for latency.",
          "How each side is measured: [README.md](README.md#issue-12s-rows).", "",
          *targets.markdown(lines, res["skipped"]), ""]
    if why is None:
        md += [f"![ratios against their targets]({png.name})", ""]
    errors = [f"- {side}: {len(errs)} failed run(s): {errs[0]}"
              for side, errs in res["errors"].items()]
    if errors:
        md += ["Failed runs:", "", *errors, ""]
    return lines, md, (png.name if why is None else why)


def results_markdown(data: dict[str, Any], table: list[dict[str, str]], rows: list[Any],
                     png: Path | None) -> str:
    import report

    when = dt.datetime.fromisoformat(data["date"])
    md = [
        "# sqlq benchmark results",
        "",
        f"Measured {when:%Y-%m-%d %H:%M} with `{data['command']}` in"
        f" {data['elapsed_s'] / 60:.1f} min.",
        "How each workload is measured and why it is fair: [README.md](README.md).",
        "",
        "## Machine",
        "",
        *[f"- {k}: {v}" for k, v in data["facts"].items()],
        "",
        "## Systems",
        "",
        "| system | class | version | blocked consumer waits by |",
        "|---|---|---|---|",
        *[f"| {s['name']} | {s['durability']} | {data['versions'][s['name']]} | {s['wait']} |"
          for s in data["systems"]],
        "",
        *[f"- skipped **{k}**: {v}" for k, v in data["skipped"].items()],
        "",
    ]
    if table:
        md += [
            "## Results",
            "",
            "Medians of the runs; spread = half the range of the runs over the median.",
            "**sqlq vs it** > 1 means sqlq is better (more jobs/s, or less latency, CPU or",
            "disk) than that row, compared with sqlq of the same durability class (full: fsync",
            "per commit, beanstalkd `-f 0`; normal: no fsync per commit, beanstalkd `-f 50`;",
            "memory: beanstalkd without binlog, compared with sqlq-normal). sqlq's own rows",
            "give their ratio to the raw apsw loop running the same SQL (the floor).",
            "",
            report.markdown_table(table),
            "",
        ]
    if png is not None:
        md += [f"![throughput and reserve latency]({png.name})", ""]
    md += [TARGETS_SLOT, ""]
    goals = report.targets(rows)
    if goals:
        md += ["## sqlq against its targets (issues 2 and 11)", "",
               "| target | measured | verdict |", "|---|---|---|",
               *[f"| {t} | {m.replace('|', '/')} | {v} |" for t, m, v in goals], ""]
    if rows:
        md += ["## Per workload: sqlq, the floor, and the best peer of the same class", "",
               *report.summary(rows), ""]
    md += ["## Parameters", "", "```", json.dumps(data["profile"]), "```", ""]
    return "\n".join(md)


def report_only(json_file: str, out: str) -> int:
    """Rebuild RESULTS.md and the PNG from a results.json (no measuring)."""
    data = json.loads(Path(json_file).read_text())
    out_dir = Path(out) if out else Path(json_file).parent
    out_dir.mkdir(parents=True, exist_ok=True)
    finish(data, out_dir)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
