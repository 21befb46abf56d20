"""Peak memory of ``sqlq copy`` (issue 39): a SQLite file of N jobs copied to a fresh
PostgreSQL database (and, with ``--backup``, the same file backed up, and ``put-many`` of
N lines) by the ``sqlq`` command, run with its stderr on a pseudo-terminal so the
progress bar is drawn as a person would see it. For each size: the time, the child's
peak RSS (``/usr/bin/time``'s, from ``wait4``) and the bar's final line. Constant memory means the
peak does not grow with N.

    .venv/bin/python bench/bench_copy_memory.py [--jobs 100000,1000000] [--dir /tmp/cm]
        [--backup] [--put-many]

The files are made once in ``--dir`` (kept between runs); the PostgreSQL server is a
throwaway one (tests/pgserver.py), durable as in production.
"""

from __future__ import annotations

import argparse
import os
import pty
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import sqlq  # noqa: E402 - the checkout's sqlq, found through ROOT
from tests.pgserver import PgServer  # noqa: E402

SQLQ = str(Path(sys.executable).with_name("sqlq"))
BODY = b'{"n": %d, "pad": "' + b"x" * 60 + b'"}'


def make_file(path: Path, jobs: int) -> None:
    """A queue of ``jobs`` ready jobs (80-byte bodies) over four tubes."""
    if path.exists():
        return
    q = sqlq.Queue(str(path), durability="normal")
    for start in range(0, jobs, 20_000):
        end = min(jobs, start + 20_000)
        q.put_many([BODY % i for i in range(start, end)], tube=f"t{start // 20_000 % 4}")
    q.close()


def run_on_pty(args: list[str], stdin: Path | None = None, cwd: str | None = None
               ) -> tuple[float, int, str, int]:
    """Run the command with stderr on a pseudo-terminal: (seconds, peak RSS in KB, the
    last line the terminal showed, exit code)."""
    master, slave = pty.openpty()
    seen = bytearray()

    def read() -> None:
        while True:
            try:
                chunk = os.read(master, 65536)
            except OSError:  # EIO: the child's end is closed
                return
            if not chunk:
                return
            seen.extend(chunk)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    started = time.monotonic()
    # The peak is /usr/bin/time's figure (wait4's ru_maxrss of its child): a child of this
    # process would count this process's memory too (the high-water mark of the memory
    # it ran in before exec), and time itself is a megabyte.
    peak = Path(tempfile.mkstemp(prefix="peak-")[1])
    with open(stdin or os.devnull, "rb") as given:
        child = subprocess.Popen(["/usr/bin/time", "-f", "%M", "-o", str(peak), *args],
                                 stdin=given, stdout=subprocess.DEVNULL, stderr=slave,
                                 cwd=cwd, env={**os.environ, "TERM": "xterm", "COLUMNS": "100"})
    os.close(slave)
    child.wait()
    seconds = time.monotonic() - started
    kilobytes = int(peak.read_text().split()[-1])
    peak.unlink()
    reader.join(5)
    os.close(master)
    screen = seen.decode("utf-8", "replace").replace("\x1b[K", "")
    last = [line for line in screen.replace("\r\n", "\n").split("\n") if line.strip()]
    final = last[-1].split("\r")[-1] if last else ""
    return seconds, kilobytes, final, child.returncode


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", default="100000,1000000")
    parser.add_argument("--dir", default="/tmp/sqlq-copy-memory")
    parser.add_argument("--backup", action="store_true", help="also sqlq backup of each file")
    parser.add_argument("--put-many", action="store_true", help="also put-many of N lines")
    parser.add_argument("--tree", help="run the sqlq of this source tree (e.g. a `git archive` "
                                       "of an older commit) instead of the checkout's")
    opts = parser.parse_args()
    sqlq_cmd, cwd = [SQLQ], None
    if opts.tree:  # python -m puts the working directory first on the path: run in the tree
        os.environ["PYTHONPATH"] = cwd = os.path.abspath(opts.tree)
        sqlq_cmd = [sys.executable, "-m", "sqlq"]
    where = Path(opts.dir)
    where.mkdir(parents=True, exist_ok=True)
    rows = []
    with PgServer(durable=True) as pg:
        print(f"PostgreSQL {pg.version()}", flush=True)
        for n, jobs in enumerate(int(j) for j in opts.jobs.split(",")):
            source = where / f"{jobs}.db"
            make_file(source, jobs)
            size = source.stat().st_size
            url = pg.create_database(f"copy_{n}_{os.getpid()}")
            s, rss, bar, rc = run_on_pty([*sqlq_cmd, "copy", str(source), url], cwd=cwd)
            rows.append(("copy to PostgreSQL", jobs, size, s, rss, rc, bar))
            print(rows[-1], flush=True)
            if opts.backup:
                dest = where / f"{jobs}.backup.db"
                dest.unlink(missing_ok=True)
                s, rss, bar, rc = run_on_pty([*sqlq_cmd, "--db", url, "backup", str(dest)], cwd=cwd)
                rows.append(("backup of PostgreSQL", jobs, size, s, rss, rc, bar))
            if opts.put_many:
                lines = where / f"{jobs}.lines"
                if not lines.exists():
                    with lines.open("wb") as out:
                        for i in range(jobs):
                            out.write(BODY % i + b"\n")
                into = where / f"{jobs}.put.db"
                for suffix in ("", "-wal", "-shm"):
                    Path(f"{into}{suffix}").unlink(missing_ok=True)
                s, rss, bar, rc = run_on_pty([*sqlq_cmd, "--db", str(into), "put-many", str(lines)],
                                               cwd=cwd)
                rows.append(("put-many from a file", jobs, lines.stat().st_size, s, rss, rc, bar))
    print(f"sqlq {sqlq.__version__}, {os.cpu_count()} cores")
    print("| what | jobs | input | seconds | peak RSS | exit |")
    print("|---|---|---|---|---|---|")
    for what, jobs, size, s, rss, rc, _ in rows:
        print(f"| {what} | {jobs:,} | {size / 1e6:.0f} MB | {s:.1f} | {rss / 1024:.0f} MB | {rc} |")
    print("\nthe bars' last lines:")
    for what, jobs, *_, bar in rows:
        print(f"  {what}, {jobs:,}: {bar}")


if __name__ == "__main__":
    main()
