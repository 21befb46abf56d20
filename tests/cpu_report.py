"""Where the suite's CPU goes, test by test: ``SQLQ_TEST_CPU=DIR make test`` (any pytest
run: ``tests/conftest.py`` registers this plugin when the variable is set).

``make test`` is bound by the CPU of a 2-core machine, not by waiting, so its time is
cut where CPU is spent. Each test process writes one line per test to
``DIR/cpu.<pid>.jsonl``:

* ``self``: the test process's own CPU (in-process tests, the test's client side);
* ``children``: that of the processes it started and waited for (the CLI, workers,
  servers: a process killed and reaped counts too; one left running does not);
* ``server``: its PostgreSQL server's (each test process has its own, conftest.py's
  ``pg_server``): the postmaster and every backend, ended or live. The first test that
  uses the server is charged its start. The servers a few fault tests start for
  themselves are not counted.

At the end, the run's summary gives the totals and the files and tests that cost most,
from every process's lines in DIR (so empty DIR before a run).
"""

from __future__ import annotations

import collections
import json
import os
import resource
import time
from collections.abc import Generator
from pathlib import Path
from typing import Any

import pytest

from . import forkserver

SHOWN = 15  # files and tests in the summary


class CpuReport:
    """The plugin: one line per test, then the summary (in the run's controller)."""

    def __init__(self, directory: str) -> None:
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self.server: Any = None  # this process's pg_server, once started (conftest.py)
        self._out: Any = None

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_protocol(self, item: pytest.Item) -> Generator[None, None, None]:
        # Not to the processes tests start: a test that runs pytest itself (test_pgserver's)
        # would add its inner run's lines. Only processes that run tests get here, so an
        # xdist controller has already passed the variable on to its workers.
        os.environ.pop("SQLQ_TEST_CPU", None)
        server = self._server_cpu()  # first and last: its own cost is not the test's
        own, children = _rusage()
        started = time.perf_counter()
        yield
        own2, children2 = _rusage()
        self._write({"test": item.nodeid, "self": own2 - own, "children": children2 - children,
                     # not below 0: a test that restarted the server started its count anew
                     "server": max(self._server_cpu() - server, 0.0),
                     "wall": time.perf_counter() - started})

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if os.environ.get("PYTEST_XDIST_WORKER"):
            return
        rows = [json.loads(line) for path in sorted(self.directory.glob("cpu.*.jsonl"))
                for line in path.read_text().splitlines() if line]
        if not rows:
            return
        write = terminalreporter.write_line
        terminalreporter.section(f"CPU by test ({self.directory})")
        total = {k: sum(r[k] for r in rows) for k in ("self", "children", "server", "wall")}
        write(f"{len(rows)} tests: in the test processes {total['self']:.0f} s, in the "
              f"processes they started {total['children']:.0f} s, in their PostgreSQL "
              f"servers {total['server']:.0f} s (the tests' wall time, summed "
              f"{total['wall']:.0f} s)")
        files: dict[str, list[float]] = collections.defaultdict(lambda: [0, 0.0, 0.0, 0.0])
        for r in rows:
            f = files[r["test"].split("::")[0]]
            f[0] += 1
            f[1] += r["self"]
            f[2] += r["children"]
            f[3] += r["server"]
        write(f"{'tests':>6} {'CPU s':>7} {'self':>6} {'children':>8} {'server':>6}  file")
        for name, (n, own, kids, srv) in sorted(files.items(),
                                                key=lambda kv: -sum(kv[1][1:]))[:SHOWN]:
            write(f"{n:6.0f} {own + kids + srv:7.1f} {own:6.1f} {kids:8.1f} {srv:6.1f}  {name}")
        write(f"{'':>6} {'CPU s':>7} {'self':>6} {'children':>8} {'server':>6}  test")
        for r in sorted(rows, key=lambda r: -(r["self"] + r["children"] + r["server"]))[:SHOWN]:
            write(f"{'':>6} {r['self'] + r['children'] + r['server']:7.1f} {r['self']:6.1f} "
                  f"{r['children']:8.1f} {r['server']:6.1f}  {r['test']}")

    def _server_cpu(self) -> float:
        return float(self.server.cpu_seconds()) if self.server is not None else 0.0

    def _write(self, row: dict[str, Any]) -> None:
        if self._out is None:
            self._out = open(self.directory / f"cpu.{os.getpid()}.jsonl", "a")  # noqa: SIM115
        self._out.write(json.dumps(row) + "\n")
        self._out.flush()


def _rusage() -> tuple[float, float]:
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    # the fork server's children are not this process's: it reports theirs as each ends
    return own.ru_utime + own.ru_stime, \
        children.ru_utime + children.ru_stime + forkserver.children_cpu
