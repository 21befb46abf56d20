"""Tracing on against off (issue 26): CPU microseconds a job for ``put`` and for a
worker's run (``Worker`` with a no-op task, one job a claim), each mode in a fresh
child process on a fresh SQLite file, durability normal.

    .venv/bin/python bench/bench_tracing.py [--jobs 2000] [--runs 3] [--callgrind]

Modes: ``off`` (opentelemetry-api hidden, as if not installed), ``api`` (installed, no
tracer provider: spans would be no-ops), ``on`` (the SDK's TracerProvider, every span
sampled, exported to an exporter that drops them: what sqlq's spans cost, not the
exporter's I/O). The median of the runs. ``--callgrind`` counts instructions a put
instead (valgrind; puts of N jobs less puts of none, over N): steady on a busy machine.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MODES = ("off", "api", "on")

CHILD = r"""
import json, os, sys, tempfile, time
jobs, mode, puts_only = int(sys.argv[1]), sys.argv[2], sys.argv[3] == "puts"
if mode == "off":
    sys.modules["opentelemetry"] = None
import sqlq
from sqlq.work.taskrun import TaskRunner
from sqlq.work.worker import Worker
if mode == "on":
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter
    from opentelemetry.sdk.trace.export import SpanExportResult
    class Drop(SpanExporter):
        def export(self, spans):
            return SpanExportResult.SUCCESS
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(Drop()))
    trace.set_tracer_provider(provider)
q = sqlq.Queue(os.path.join(tempfile.mkdtemp(), "q.db"), durability="normal")

@q.task(tube="bench")
def noop():
    pass

body = noop.message()
q.put(body, tube="bench")
q.reserve("bench", timeout=0).delete()  # warm
start = time.process_time()
for _ in range(jobs):
    q.put(body, tube="bench")
put = time.process_time() - start
if puts_only:
    sys.exit(0)
worker = Worker(q, TaskRunner({"noop": noop}), ["bench"], burst=True, prefetch=1)
start = time.process_time()
done = worker.run()
run = time.process_time() - start
assert done == jobs, done
print(json.dumps({"put": put / jobs * 1e6, "run": run / jobs * 1e6}))
"""


ENV = {"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"}


def measure(jobs: int, mode: str) -> dict[str, float]:
    out = subprocess.run([sys.executable, "-c", CHILD, str(jobs), mode, "both"], cwd=ROOT,
                         env=ENV, capture_output=True, text=True, check=True)
    return json.loads(out.stdout)  # type: ignore[no-any-return]


def instructions(jobs: int, mode: str) -> int:
    """Instructions the child runs putting ``jobs`` jobs (and no worker), by callgrind."""
    out = subprocess.run(["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null",
                          sys.executable, "-c", CHILD, str(jobs), mode, "puts"], cwd=ROOT,
                         env=ENV, capture_output=True, text=True, check=True)
    found = re.search(r"Collected : (\d+)", out.stderr)
    assert found is not None, out.stderr
    return int(found.group(1))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=2000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--callgrind", action="store_true")
    args = parser.parse_args()
    if args.callgrind:
        for mode in MODES:
            per_put = (instructions(args.jobs, mode) - instructions(0, mode)) / args.jobs
            print(f"{mode:<5} {per_put:>10,.0f} instructions a put")
        return
    results: dict[str, list[dict[str, float]]] = {mode: [] for mode in MODES}
    for _ in range(args.runs):
        for mode in MODES:  # turn and turn about: drift hits every mode alike
            results[mode].append(measure(args.jobs, mode))
    print(f"{'mode':<5} {'put us CPU':>11} {'run us CPU':>11}  (median of {args.runs}, "
          f"{args.jobs} jobs)")
    for mode in MODES:
        put = statistics.median(r["put"] for r in results[mode])
        run = statistics.median(r["run"] for r in results[mode])
        print(f"{mode:<5} {put:>11.1f} {run:>11.1f}")


if __name__ == "__main__":
    main()
