"""What a command imports (issue 34: a ``sqlq put`` cost 3.5x ``import apsw, click``,
since every command imported the whole package). Checked as module names in a fresh
process, not as times: a shared machine's timings would make this flaky, and a module
that comes back shows here by name. bench/bench_startup.py measures the time."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

from tests.conftest import ROOT

# Run a command in a fresh interpreter as the console script does, then list what is loaded.
# (No json here: the child must import nothing the command does not.)
RUN = """
import sys
from sqlq.cli import cli
code = cli.main(sys.argv[1:], prog_name="sqlq", standalone_mode=False)
print(repr({"code": code, "modules": sorted(sys.modules)}), file=sys.stderr)
"""

# What a put on a file needs none of: the dashboard, the servers, the worker, the other
# commands, the dashboard's reads, PostgreSQL, OpenTelemetry's API, retrying (tenacity),
# and stdlib modules a put does not use.
NOT_FOR_A_PUT = (
    "sqlq.dashboard", "sqlq.server", "sqlq.work", "sqlq.asyncq", "sqlq.observe",
    "sqlq.failures", "sqlq.histograms", "sqlq.core.registry", "sqlq.stats", "sqlq.horizon",
    "sqlq.attempts", "sqlq.throughput", "sqlq.backends.postgres", "sqlq.cli.admin",
    "sqlq.cli.serve", "sqlq.cli.work", "sqlq.cli.topics", "sqlq.cli.limits", "sqlq.cli.backup",
    "sqlq.cli.top", "sqlq.cli.control",
    "psycopg", "opentelemetry.trace", "tenacity", "asyncio", "logging", "sqlite3",
    "pathlib", "urllib.parse", "base64", "traceback", "dataclasses", "json",
)


def run(*argv: str) -> tuple[int, list[str]]:
    out = subprocess.run([sys.executable, "-c", RUN, *argv], capture_output=True,
                         text=True, cwd=ROOT, timeout=60)
    report = ast.literal_eval(out.stderr.strip().splitlines()[-1])
    return report["code"], report["modules"]


def unwanted(modules: list[str], names: tuple[str, ...]) -> list[str]:
    return [m for m in modules if m in names or m.startswith(tuple(n + "." for n in names))]


def test_a_put_on_a_file_imports_what_a_put_uses_and_nothing_else(tmp_path: Path) -> None:
    db = str(tmp_path / "q.db")
    assert run("--db", db, "put", "first")[0] == 0  # the schema made
    code, modules = run("--db", db, "put", "x", "--tube", "emails")
    assert code == 0
    assert unwanted(modules, NOT_FOR_A_PUT) == []
    assert "sqlq.cli.puts" in modules and "apsw" in modules  # it did run the put


def test_help_lists_every_command_without_importing_one() -> None:
    code, modules = run("--help")
    assert code == 0
    assert [m for m in modules if m.startswith("sqlq.cli.") and m not in (
        "sqlq.cli.exits", "sqlq.cli.group", "sqlq.cli.index", "sqlq.cli.options")] == []
    assert unwanted(modules, ("sqlq.queue", "sqlq.backends.sqlite", "apsw")) == []


def test_importing_sqlq_loads_no_queue_and_every_public_name_resolves() -> None:
    code = ("import sys, sqlq; before = sorted(m for m in sys.modules if m.startswith('sqlq'))\n"
            "[getattr(sqlq, name) for name in sqlq.__all__]\n"
            "print(before, sqlq.Queue.__module__, sqlq.Job.__module__)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=ROOT, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["['sqlq',", "'sqlq.errors',", "'sqlq.version']", "sqlq.queue",
                                  "sqlq.model"]


def test_python_m_sqlq_still_runs_a_put(tmp_path: Path) -> None:
    out = subprocess.run([sys.executable, "-m", "sqlq", "--db", str(tmp_path / "q.db"), "put",
                          "x"], capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert (out.returncode, out.stdout) == (0, "1\n"), out.stderr


def test_the_beanstalkd_server_imports_no_typing_re_or_logging_before_it_listens() -> None:
    """sqlq-beanstalkd must listen within 100 ms of exec on a loaded machine
    (greenstalk's suite connects 0.1 s after starting it): typing and re cost it 3.5 ms
    of the 20 its imports took (test_server.py checks that no Queue is imported)."""
    code = "import sys, sqlq.server; print(' '.join(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=ROOT, timeout=60)
    assert out.returncode == 0, out.stderr
    assert unwanted(out.stdout.split(), ("typing", "re", "logging", "json", "asyncio")) == []
