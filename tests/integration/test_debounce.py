"""Debounce under concurrency (issue 38): replaces of one key from several real processes,
on every backend, leave exactly one live job for the key; with workers running the
key's jobs meanwhile, no two of its jobs ever run at once and the last put's body runs
last."""

from __future__ import annotations

import json
import subprocess

import pytest

import sqlq
from tests.conftest import spawn
from tests.timing import PATIENCE, soon

#: A producer: opens its queue, says "ready" and waits for a line on stdin (every
#: process is open by then, however slow the machine), then replaces the key N times.
#: With a gate, half-way it waits until a worker has run one of the key's jobs: the
#: later replaces then meet runs whatever the scheduling (on a loaded machine the three
#: producers could finish before a worker had claimed anything: one run in all).
PRODUCER = """
import sys, time
import sqlq
url, name, n, delay = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
gate = len(sys.argv) > 5
with sqlq.Queue(url, durability="normal") as q:
    q.stats()
    print("ready", flush=True)
    sys.stdin.readline()
    ids = set()
    for i in range(n):
        if gate and i == n // 2:
            deadline = time.monotonic() + 60
            while q.stats_tube("t")["cmd-delete"] == 0:
                assert time.monotonic() < deadline, "no run of the key's job in 60 s"
                time.sleep(0.01)
        ids.add(q.put(f"{name}-{i}", tube="t", unique_key="k", delay=delay,
                      on_conflict="replace"))
print(len(ids))
"""

#: A worker: runs the tube's jobs (each for a few ms), printing one JSON line per run
#: (body, start and end on the system's monotonic clock), until the tube stays empty;
#: says "ready" once its queue is open.
WORKER = """
import json, sys, time
import sqlq
url, quiet = sys.argv[1], float(sys.argv[2])
with sqlq.Queue(url, durability="normal") as q:
    q.stats()
    print("ready", flush=True)
    idle_since = time.monotonic()
    while time.monotonic() - idle_since < quiet:
        job = q.reserve(tubes="t", timeout=0.2)
        if job is None:
            continue
        began = time.monotonic()
        time.sleep(0.005)
        ended = time.monotonic()
        print(json.dumps([job.body.decode(), began, ended]), flush=True)
        job.delete()
        idle_since = time.monotonic()
"""


def _start(producers: list[subprocess.Popen[str]],
           others: tuple[subprocess.Popen[str], ...] | list[subprocess.Popen[str]] = ()) -> None:
    """Wait until every process has its queue open, then let the producers go: the
    replaces meet one another (and the workers) whatever the machine's load."""
    for proc in (*others, *producers):
        assert proc.stdout is not None
        assert proc.stdout.readline() == "ready\n", proc.communicate(timeout=PATIENCE)
    for proc in producers:
        assert proc.stdin is not None
        proc.stdin.write("go\n")
        proc.stdin.flush()


def _finish(procs: list, timeout: float) -> list[str]:  # type: ignore[type-arg]
    outs = []
    for proc in procs:
        out, err = proc.communicate(timeout=timeout)
        assert proc.returncode == 0, err
        outs.append(out.removeprefix("ready\n"))
    return outs


@pytest.mark.slow
def test_replaces_from_several_processes_leave_one_job(db_url: str) -> None:
    with sqlq.Queue(db_url, durability="normal") as q:
        q.stats()
        producers = [spawn(PRODUCER, db_url, f"p{n}", "100", "30", stdin=subprocess.PIPE)
                     for n in range(4)]
        _start(producers)
        outs = _finish(producers, PATIENCE)
        assert all(out.split() == ["1"] for out in outs), outs  # one id each, all along
        stats = q.stats_tube("t")
        live = {s: stats[f"current-jobs-{s}"]
                for s in ("ready", "delayed", "reserved", "buried", "waiting")}
        assert live == {"ready": 0, "delayed": 1, "reserved": 0, "buried": 0, "waiting": 0}
        job = q.peek_delayed("t")
        assert job is not None and job.unique_key == "k"
        assert job.body.decode().endswith("-99")  # the last replace committed is a last put


@pytest.mark.slow
def test_replaces_while_workers_run_the_key_never_overlap(db_url: str) -> None:
    """Replaces meet the key's job ready, reserved (a follow-up waits for it) and waiting
    (changed in place) at random: the runs of the key's jobs never overlap, and once the
    producers stop, the last run carries the body of a producer's last put."""
    with sqlq.Queue(db_url, durability="normal") as q:
        q.stats()
        workers = [spawn(WORKER, db_url, str(soon(3))) for _ in range(2)]
        producers = [spawn(PRODUCER, db_url, f"p{n}", "150", "0", "gate", stdin=subprocess.PIPE)
                     for n in range(3)]
        _start(producers, workers)
        _finish(producers, PATIENCE)
        runs = sorted(tuple(json.loads(line)) for out in _finish(workers, PATIENCE)
                      for line in out.splitlines())
        stats = q.stats()
        assert stats["current-jobs-ready"] + stats["current-jobs-waiting"] == 0  # all run
        assert len(runs) >= 2
        by_start = sorted(runs, key=lambda r: r[1])
        for before, after in zip(by_start, by_start[1:], strict=False):
            assert before[2] <= after[1], (before, after)  # one run of the key at a time
        assert by_start[-1][0] in {f"p{n}-149" for n in range(3)}, by_start[-3:]
