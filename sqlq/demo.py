"""``make demo``: producers and workers in separate processes on one file, jobs flowing.

Run as ``python -m sqlq.demo [PATH]``. Two producer processes put jobs (some
urgent, some delayed) into two tubes; three worker processes block in
``reserve`` and print what they get; one job fails and is buried with a reason.
At the end the file's stats are printed. Nothing here is special to the demo:
it is the plain library API.
"""

from __future__ import annotations

import multiprocessing as mp
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


def worker(path: str, name: str, seconds: float) -> None:
    deadline = time.monotonic() + seconds
    with sqlq.Queue(path) as q:
        while (left := deadline - time.monotonic()) > 0:
            job = q.reserve(tubes=TUBES, timeout=left)
            if job is None:
                break
            waited = (sqlq.durations.now_ms() - job.created_at) / 1000
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
    procs = [ctx.Process(target=worker, args=(path, f"worker-{i}", 6.0)) for i in (1, 2, 3)]
    procs += [ctx.Process(target=producer, args=(path, f"producer-{i}", 20)) for i in (1, 2)]
    for p in procs:
        p.start()
    for p in procs:
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
        print(f"     {sqlq_cmd} --db {path} peek --buried --tube {buried.tube}")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "demo/demo.db")
