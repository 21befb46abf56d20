"""Start-up time (issue 34): wall time of one ``sqlq put`` against the floor of
``python -c "import apsw, click"``, of one ``sqlq reserve --timeout 0.05`` on an empty
queue (a process's first wait: its notifier's set-up, then 50 ms asleep), and of
``sqlq-beanstalkd`` from exec to its port accepting a connection, against Debian's
``beanstalkd``. Reported, not asserted.

    .venv/bin/python bench/bench_startup.py [--runs 7] [--tree /work/main --tree .]

Every run of every side is one fresh process, and the sides take turns (run 1 of each,
then run 2 of each...), so a slow moment of the shared machine hits them all alike. Each
``--tree`` is a checkout whose ``sqlq`` is measured (through ``PYTHONPATH``, with this
venv's Python: the console script's three lines, so no build step); the default is this
one. ``put`` writes to a file of its own per tree, created before the runs (so the
schema's creation is not counted). The median of the runs, the min and max beside it,
and ``put`` over the floor (the issue's target: at most 1.8x the wall time;
``sqlq-beanstalkd``: under 100 ms); CPU time (user + system) beside the wall time, since
it moves less when others share the machine (a server's: until it listened).
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
from collections.abc import Callable
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


def timed(argv: list[str], env: dict[str, str], ok: tuple[int, ...] = (0,)
          ) -> tuple[float, float]:
    """(seconds from exec to exit, CPU seconds of the process and its children: user +
    system); an exit status not in ``ok`` stops the bench (a bench of errors measures
    nothing). The CPU time moves less than the wall time when other processes share the
    cores."""
    start = time.perf_counter()
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    took = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode not in ok:
        assert proc.stderr is not None
        sys.exit(f"{argv} exited {proc.returncode}: {proc.stderr.read().decode()[-500:]}")
    return took, usage.ru_utime + usage.ru_stime


def until_listening(argv: list[str], env: dict[str, str], port: int) -> tuple[float, float]:
    """Seconds from exec to the first accepted connection to 127.0.0.1:port (tried every
    0.5 ms, as an impatient client would), then the server is stopped."""
    start = time.perf_counter()
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                return time.perf_counter() - start, _cpu(proc.pid)
            except OSError:
                if proc.poll() is not None:
                    sys.exit(f"{argv} exited {proc.returncode} before listening")
                if time.perf_counter() - start > 10:
                    sys.exit(f"{argv} not listening after 10 s")
                time.sleep(0.0005)
    finally:
        proc.terminate()
        proc.wait()


def _cpu(pid: int) -> float:
    """CPU seconds the live process has used so far (its main thread's, from
    /proc/PID/schedstat, in ns: /proc/PID/stat counts in 10 ms ticks)."""
    with open(f"/proc/{pid}/schedstat") as f:
        return int(f.read().split()[0]) / 1e9


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
    sides: dict[str, Callable[[], tuple[float, float]]] = {"floor: python -c 'import apsw, click'":
                                lambda: timed([py, "-c", "import apsw, click"], base_env)}
    for n, tree in enumerate(trees):
        env = {**base_env, "PYTHONPATH": str(tree)}
        db = work / f"put{n}.db"
        timed([py, str(work / "entry.py"), "--db", str(db), "put", "warm"], env)
        label = f" [{tree}]" if len(trees) > 1 else ""
        put = [py, str(work / "entry.py"), "--db", str(db), "put", "x"]
        sides[f"sqlq put{label}"] = lambda put=put, env=env: timed(put, env)
        timed([py, str(work / "entry.py"), "--db", str(work / f"wait{n}.db"), "put", "w"], env)
        timed([py, str(work / "entry.py"), "--db", str(work / f"wait{n}.db"), "delete", "1"], env)
        wait = [py, str(work / "entry.py"), "--db", str(work / f"wait{n}.db"), "reserve",
                "--timeout", "0.05"]
        sides[f"sqlq reserve --timeout 0.05{label}"] = (
            lambda wait=wait, env=env: timed(wait, env, ok=(4,)))  # 4: timed out
        sides[f"sqlq-beanstalkd listening{label}"] = (
            lambda env=env: _listen([py, str(work / "server.py")], env))
    beanstalkd = shutil.which("beanstalkd")
    if beanstalkd:
        sides["beanstalkd listening"] = lambda: _listen([beanstalkd], base_env)
    else:
        print("beanstalkd not installed: its row is left out")
    times: dict[str, list[tuple[float, float]]] = {name: [] for name in sides}
    try:
        for _ in range(args.runs):
            for name, run in sides.items():
                times[name].append(run())
    finally:
        shutil.rmtree(work, ignore_errors=True)
    first = times[next(iter(times))]
    floor = [statistics.median(t[i] for t in first) for i in (0, 1)]
    print(f"{args.runs} runs each, interleaved; ms, median (min-max); CPU: user + system")
    for name, runs in times.items():
        row = f"  {name:<44}"
        for i, what in enumerate(("wall", "CPU")):
            ts = [t[i] for t in runs]
            med = statistics.median(ts)
            row += f" {what} {med * 1e3:6.1f} ({min(ts) * 1e3:.0f}-{max(ts) * 1e3:.0f})"
            if name.startswith("sqlq put"):
                row += f" {med / floor[i]:.2f}x"
        print(row)


def _listen(argv: list[str], env: dict[str, str]) -> tuple[float, float]:
    port = free_port()
    return until_listening([*argv, "-l", "127.0.0.1", "-p", str(port)], env, port)


if __name__ == "__main__":
    main()
