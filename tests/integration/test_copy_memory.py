"""``sqlq copy`` holds one page at a time, whatever the size of the queue (issue 39): a
store of about 80 MB (jobs, kept results and dependency edges) copied to PostgreSQL
with a page of 50 rows by a ``sqlq copy`` process whose peak memory stays far below the
store's size. A copy that read the jobs, the results or the edges whole would hold
them (the results alone are 40 MB; read whole, the peak was 90 MB) and pass the bound."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import sqlq
from tests.timing import PATIENCE

ROWS = 20_000
BODY = 2_000
#: The child's peak resident memory, at most (an interpreter with sqlq, psycopg and
#: one page: about 45 MB measured; the results alone are 40 MB).
BOUND_MB = 70

#: Runs ARGV and prints its peak RSS (KB) and exit code. A small process of its own: a
#: child's peak counts the memory of the process it was forked from, the test's.
LAUNCH = ("import os, sys; pid = os.posix_spawn(sys.argv[1], sys.argv[1:], os.environ); "
          "_, status, usage = os.wait4(pid, 0); "
          "print(usage.ru_maxrss, os.waitstatus_to_exitcode(status))")
#: sqlq copy with a page of 50 rows.
COPY = ("import sys, sqlq.copy; sqlq.copy.PAGE = 50; from sqlq.cli import main; "
        "sys.argv[0] = 'sqlq'; main()")


def _store(path: Path) -> int:
    """A queue of ROWS jobs and ROWS kept results of BODY bytes each, and 2 * ROWS edges:
    its bytes of bodies and results."""
    with sqlq.Queue(str(path)) as q:
        for start in range(0, ROWS, 2_000):
            q.put_many([b"%06d" % i + b"j" * (BODY - 6) for i in range(start, start + 2_000)])
        copying = q.backend.store.copying
        results = [(i, b"%06d" % i + b"r" * (BODY - 6), 2**62) for i in range(1, ROWS + 1)]
        edges = [(parent, child) for parent in range(1, ROWS + 1) for child in
                 range(ROWS + 1, ROWS + 3)]
        def write(conn: Any) -> None:
            copying.import_rows(conn, "result", results)
            copying.import_rows(conn, "edge", edges)

        q.backend.write(write)
    return 2 * ROWS * BODY


@pytest.mark.slow
def test_copy_holds_one_page_whatever_the_size(tmp_path: Path, pg_url: str) -> None:
    source = tmp_path / "big.db"
    size = _store(source)
    assert size / 1e6 > BOUND_MB
    done = subprocess.run([sys.executable, "-S", "-c", LAUNCH, sys.executable, "-c", COPY,
                           "copy", str(source), pg_url, "--quiet", "--json"],
                          capture_output=True, text=True, timeout=10 * PATIENCE,
                          env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    peak_kb, code = map(int, done.stdout.split()[-2:])
    assert code == 0, done.stderr
    counts = json.loads(done.stdout.splitlines()[0])
    assert (counts["job"], counts["edge"], counts["result"]) == (ROWS, 2 * ROWS, ROWS)
    peak_mb = peak_kb / 1024
    assert peak_mb < BOUND_MB, f"peak {peak_mb:.0f} MB for a {size / 1e6:.0f} MB store"
    with sqlq.Queue(pg_url) as q:
        assert q.result(ROWS, timeout=0) == b"%06d" % ROWS + b"r" * (BODY - 6)
        assert q.stats()["current-jobs-ready"] == ROWS
