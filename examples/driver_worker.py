"""The driver/worker pattern: put a thousand tasks, then wait for each result.

    python examples/driver_worker.py [JOBS] [WORKERS]      # default 1000 tasks, 4 workers

The driver enqueues every task in one transaction, starts ``sqlq work`` with four
worker processes (any machine process that opens the same file would do), and
collects the results in order with ``q.result``, which sleeps on the same file
notification as a worker's ``reserve``: no polling. A task's return value is
stored as JSON when its job completes; ``result`` returns those bytes.

The workers can just as well be started by hand, before or after the driver:

    SQLQ_DB=driver_worker.db sqlq work --import driver_worker --tube squares --processes 4
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import sqlq

# The workers find the file through $SQLQ_DB too (absolute: they run in this directory).
q = sqlq.Queue(os.environ.setdefault("SQLQ_DB", os.path.abspath("driver_worker.db")))


@q.task(tube="squares")
def square(n: int) -> int:
    return n * n


def main(jobs: int = 1000, workers: int = 4) -> None:
    start = time.monotonic()
    with q.transaction():  # a thousand puts, one commit
        ids = [square.put(n) for n in range(jobs)]

    # --burst: each worker exits once no job is left. SQLQ_DB tells them the file.
    here = os.path.dirname(os.path.abspath(__file__))
    pool = subprocess.Popen([sys.executable, "-m", "sqlq", "work", "--import", "driver_worker",
                             "--tube", "squares", "--processes", str(workers), "--burst",
                             "--log-level", "WARNING"], cwd=here)
    try:
        results = [json.loads(q.result(job_id, timeout=60)) for job_id in ids]
    finally:
        pool.wait(timeout=60)
    elapsed = time.monotonic() - start

    assert results == [n * n for n in range(jobs)], "a result went astray"
    print(f"{jobs} tasks, {workers} worker processes: all results in {elapsed:.2f} s "
          f"({jobs / elapsed:,.0f} tasks/s); sum of squares {sum(results)}")


if __name__ == "__main__":
    main(*(int(arg) for arg in sys.argv[1:3]))
