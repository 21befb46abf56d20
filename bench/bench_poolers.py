"""Wake-up latency and dead-holder recovery through each way to reach PostgreSQL (issue 37):
directly, through PgBouncer in session mode, in transaction mode (waiters poll), and in
transaction mode with ``listen_url`` (a direct URL for the one listening connection).

    .venv/bin/python bench/bench_poolers.py [--wakes 30] [--kills 5] [--elsewhere 2]

Wake-up: a worker process blocked in ``reserve`` on an empty tube; this process puts a
job at a random moment (so a poll is met at a random phase) and the worker writes the
time it got it: put returned to reserve returned, p50 and p99. Recovery: a holder
process reserves a job and is SIGKILLed while this process's reserve waits on the tube:
kill to reserve returned, on this machine (its pid is seen gone), and "elsewhere": the
holder in a pid namespace of its own (``unshare``, root or user namespaces), so only
its silent heartbeats prove the death. A throwaway server from ``tests/pgserver.py``
(fsync and synchronous commit on)
and Debian's PgBouncer (``tests/servers.py``), both on loopback.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any
from urllib.parse import quote

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import sqlq  # noqa: E402
from tests.pgserver import PgServer  # noqa: E402
from tests.servers import PgBouncer  # noqa: E402

WAITER = """
import sys, time, sqlq
q = sqlq.Queue(sys.argv[1])
q.stats()
print("ready", flush=True)
while True:
    job = q.reserve("w", timeout=60)
    got = time.time()
    job.delete()
    print(got, flush=True)
"""

HOLDER = """
import sys, time, sqlq
q = sqlq.Queue(sys.argv[1])
job = q.reserve("h", timeout=30)
print(job.id, flush=True)
time.sleep(600)
"""


def _spawn(code: str, url: str, prefix: list[str] | None = None) -> subprocess.Popen[str]:
    return subprocess.Popen([*(prefix or []), sys.executable, "-c", code, url],
                            stdout=subprocess.PIPE, text=True,
                            env=dict(os.environ, PYTHONPATH=str(ROOT)))


def wakes(url: str, n: int, rng: random.Random) -> list[float]:
    proc = _spawn(WAITER, url)
    assert proc.stdout is not None
    try:
        assert proc.stdout.readline().strip() == "ready"
        out = []
        with sqlq.Queue(url) as q:
            for _ in range(n):
                time.sleep(0.3 + rng.uniform(0, 0.6))
                q.put(b"w", tube="w")
                put_at = time.time()
                out.append(float(proc.stdout.readline()) - put_at)
        return out
    finally:
        proc.kill()
        proc.wait()


def recovery(url: str, rng: random.Random, prefix: list[str] | None = None) -> float:
    with sqlq.Queue(url) as q:
        job_id = q.put(b"h", tube="h", ttr=600)
        proc = _spawn(HOLDER, url, prefix)
        assert proc.stdout is not None
        try:
            assert int(proc.stdout.readline()) == job_id
            got: list[Any] = []
            waiter = threading.Thread(target=lambda: got.append(q.reserve("h", timeout=60)))
            waiter.start()
            time.sleep(1.0 + rng.uniform(0, 0.5))  # any phase of the waiter's 0.5 s look
            proc.kill()
            killed = time.monotonic()
            waiter.join(90)
            took = time.monotonic() - killed
        finally:
            proc.kill()
            proc.wait()
        assert got and got[0] is not None and got[0].id == job_id
        got[0].delete()
        return took


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--wakes", type=int, default=30)
    parser.add_argument("--kills", type=int, default=5)
    parser.add_argument("--elsewhere", type=int, default=2)
    args = parser.parse_args()
    rng = random.Random(37)
    unshare = ["unshare", "--pid", "--fork", "--kill-child"] if os.geteuid() == 0 else \
        ["unshare", "--user", "--map-root-user", "--pid", "--fork", "--kill-child"]
    with PgServer(durable=True) as server:  # fsync and synchronous_commit on
        _, direct = server.clone("template1")
        session, transaction = PgBouncer(server, "session"), PgBouncer(server, "transaction")
        with session, transaction:
            ways = {"direct": direct, "session pool": session.through(direct),
                    "transaction pool": transaction.through(direct),
                    "transaction pool + listen_url": transaction.through(direct)
                    + "?listen_url=" + quote(direct, safe="")}
            print("| way | wake p50 / p99 | recovery, this machine (p50, max) | "
                  "recovery, elsewhere |")
            print("|---|---|---|---|")
            for name, url in ways.items():
                sqlq.Queue(url).close()
                w = sorted(wakes(url, args.wakes, rng))
                here = [recovery(url, rng) for _ in range(args.kills)]
                away = [recovery(url, rng, unshare) for _ in range(args.elsewhere)] \
                    if shutil.which("unshare") else []
                print(f"| {name} | {statistics.median(w) * 1000:.1f} / "
                      f"{w[int(len(w) * 0.99) - 1 if len(w) > 1 else 0] * 1000:.0f} ms | "
                      f"{statistics.median(here):.2f} s, {max(here):.2f} s | "
                      + (", ".join(f"{t:.2f} s" for t in away) or "-") + " |", flush=True)


if __name__ == "__main__":
    main()
