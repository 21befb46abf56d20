"""Start-up time (issue 34): wall time of one ``sqlq put`` against the floor of
``python -c "import apsw, click"``, and of ``sqlq-beanstalkd`` from exec to its port
accepting a connection, against Debian's ``beanstalkd``. Reported, not asserted.

    .venv/bin/python bench/bench_startup.py [--runs 7] [--tree /work/main --tree .]

Every run of every side is one fresh process, and the sides take turns (run 1 of each,
then run 2 of each...), so a slow moment of the shared machine hits them all alike. Each
``--tree`` is a checkout whose ``sqlq`` is measured (through ``PYTHONPATH``, with this
venv's Python: the console script's three lines, so no build step); the default is this
one. ``put`` writes to a file of its own per tree, created before the runs (so the
schema's creation is not counted). The median of the runs, the min and max beside it,
and ``put`` over the floor (the issue's target: at most 1.8x; ``sqlq-beanstalkd``: under
100 ms).
"""

from __future__ import annotations

import argparse
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# The console script (.venv/bin/sqlq) as pip writes it, minus the shebang.
ENTRY = "import sys\nfrom sqlq.cli import main\nsys.exit(main())\n"
SERVER = "from sqlq.server import beanstalkd_main\nbeanstalkd_main()\n"


def free_port() -> int:
    """A port nothing listens on now (the kernel's choice)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def timed(argv: list[str], env: dict[str, str]) -> float:
    """Seconds from exec to exit; a failure stops the bench (a bench of errors measures nothing)."""
    start = time.perf_counter()
    done = subprocess.run(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    took = time.perf_counter() - start
    if done.returncode:
        sys.exit(f"{argv} exited {done.returncode}: {done.stderr.decode()[-500:]}")
    return took


def until_listening(argv: list[str], env: dict[str, str], port: int) -> float:
    """Seconds from exec to the first accepted connection to 127.0.0.1:port (tried every
    0.5 ms, as an impatient client would), then the server is stopped."""
    start = time.perf_counter()
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                return time.perf_counter() - start
            except OSError:
                if proc.poll() is not None:
                    sys.exit(f"{argv} exited {proc.returncode} before listening")
                if time.perf_counter() - start > 10:
                    sys.exit(f"{argv} not listening after 10 s")
                time.sleep(0.0005)
    finally:
        proc.terminate()
        proc.wait()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--tree", action="append", type=Path,
                        help="a checkout whose sqlq to measure (repeatable; default: this one)")
    args = parser.parse_args()
    trees = [t.resolve() for t in args.tree or [ROOT]]
    work = Path(tempfile.mkdtemp(prefix="sqlq-bench-startup-"))
    (work / "entry.py").write_text(ENTRY)
    (work / "server.py").write_text(SERVER)
    py = sys.executable
    base_env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "SQLQ_"))}
    sides: dict[str, object] = {"floor: python -c 'import apsw, click'":
                                lambda: timed([py, "-c", "import apsw, click"], base_env)}
    for n, tree in enumerate(trees):
        env = {**base_env, "PYTHONPATH": str(tree)}
        db = work / f"put{n}.db"
        timed([py, str(work / "entry.py"), "--db", str(db), "put", "warm"], env)
        label = f" [{tree}]" if len(trees) > 1 else ""
        put = [py, str(work / "entry.py"), "--db", str(db), "put", "x"]
        sides[f"sqlq put{label}"] = lambda put=put, env=env: timed(put, env)
        sides[f"sqlq-beanstalkd listening{label}"] = (
            lambda env=env: _listen([py, str(work / "server.py")], env))
    beanstalkd = shutil.which("beanstalkd")
    if beanstalkd:
        sides["beanstalkd listening"] = lambda: _listen([beanstalkd], base_env)
    else:
        print("beanstalkd not installed: its row is left out")
    times: dict[str, list[float]] = {name: [] for name in sides}
    try:
        for _ in range(args.runs):
            for name, run in sides.items():
                times[name].append(run())  # type: ignore[operator]
    finally:
        shutil.rmtree(work, ignore_errors=True)
    floor = statistics.median(times[next(iter(times))])
    print(f"{args.runs} runs each, interleaved; ms: median (min-max)")
    for name, ts in times.items():
        med = statistics.median(ts)
        ratio = f"  {med / floor:.2f}x the floor" if name.startswith("sqlq put") else ""
        print(f"  {name:<60} {med * 1e3:6.1f} ({min(ts) * 1e3:.1f}-{max(ts) * 1e3:.1f}){ratio}")


def _listen(argv: list[str], env: dict[str, str]) -> float:
    port = free_port()
    return until_listening([*argv, "-l", "127.0.0.1", "-p", str(port)], env, port)


if __name__ == "__main__":
    main()
