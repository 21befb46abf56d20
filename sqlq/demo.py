"""``make demo``: producers and workers in separate processes on one file, jobs flowing.

Run as ``python -m sqlq.demo [PATH]``. Two producer processes put jobs (some
urgent, some delayed) into two tubes; three worker processes block in
``reserve`` and print what they get; one job fails and is buried with a reason.
At the end the file's stats are printed. Nothing here is special to the demo:
it is the plain library API.
"""

from __future__ import annotations

import multiprocessing as mp
import multiprocessing.synchronize
import os
import random
import sys
import time

import sqlq

TUBES = ["emails", "thumbnails"]


def producer(path: str, name: str, count: int) -> None:
    with sqlq.Queue(path) as q:
        for i in range(count):
            tube = TUBES[i % 2]
            urgent = random.random() < 0.2
            delay = 1.5 if random.random() < 0.15 else 0
            body = f"{name}-{i}" + (" FAIL" if (name, i) == ("producer-1", 7) else "")
            jid = q.put(body, tube=tube, priority=10 if urgent else 1024, delay=delay)
            extra = " urgent" if urgent else (f" delayed {delay}s" if delay else "")
            print(f"  {name:<11} put  #{jid:<3} {tube:<10} {body}{extra}", flush=True)
            time.sleep(random.uniform(0.02, 0.12))


def drained(q: sqlq.Queue) -> bool:
    """No job left to wait for: none ready or delayed (the buried one stays)."""
    stats = q.stats()
    return bool(stats["current-jobs-ready"] == 0 and stats["current-jobs-delayed"] == 0)


def worker(path: str, name: str, seconds: float, produced: mp.synchronize.Event) -> None:
    """Run jobs until the producers are done and nothing is left (``seconds`` at most)."""
    deadline = time.monotonic() + seconds
    with sqlq.Queue(path) as q:
        while (left := deadline - time.monotonic()) > 0:
            job = q.reserve(tubes=TUBES, timeout=min(left, 0.25))
            if job is None:
                if produced.is_set() and drained(q):
                    break
                continue
            waited = (sqlq.core.durations.now_ms() - job.created_at) / 1000
            if job.body.endswith(b"FAIL"):
                job.bury(reason="demo: this one always fails")
                print(f"    {name:<9} bury #{job.id:<3} {job.tube:<10} (reason kept for peek)",
                      flush=True)
                continue
            time.sleep(random.uniform(0.02, 0.08))  # the "work"
            job.delete()
            print(f"    {name:<9} done #{job.id:<3} {job.tube:<10} {job.text():<16}"
                  f" pri {job.priority:<4} after {waited:.2f}s", flush=True)


def main(path: str) -> None:
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    for suffix in ("", "-wal", "-shm"):
        if os.path.exists(path + suffix):
            os.unlink(path + suffix)
    sqlq.Queue(path).close()
    print(f"sqlq {sqlq.__version__} demo on {path}: 2 producers, 3 workers, 2 tubes\n")
    ctx = mp.get_context("spawn")
    produced = ctx.Event()
    workers = [ctx.Process(target=worker, args=(path, f"worker-{i}", 20.0, produced))
               for i in (1, 2, 3)]
    producers = [ctx.Process(target=producer, args=(path, f"producer-{i}", 20)) for i in (1, 2)]
    for p in workers + producers:
        p.start()
    for p in producers:
        p.join()
    produced.set()  # the workers stop once the queue is drained
    for p in workers:
        p.join()
    with sqlq.Queue(path) as q:
        stats = q.stats()
        buried = q.peek_buried("emails") or q.peek_buried("thumbnails")
    print("\nstats:", ", ".join(f"{k} {v}" for k, v in stats.items()
                                if k.startswith(("current-jobs", "total"))))
    if buried:
        print(f"buried: #{buried.id} {buried.body.decode()!r}, reason: {buried.bury_reason}")
    sqlq_cmd = os.path.join(os.path.dirname(sys.executable), "sqlq")
    print(f"\nTry: {sqlq_cmd} --db {path} stats")
    if buried:
        print(f"     {sqlq_cmd} --db {path} peek --buried")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "demo/demo.db")
