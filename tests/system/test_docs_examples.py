"""Every code block of README.md and docs/ runs as written, in page order, in a fresh
directory (SQLite), or says in its first lines that it is a fragment.

The blocks are found by Sybil (its Markdown code-block lexer: the same fences a reader
sees). For each page, in one empty directory and one Python namespace:

- a ``python`` block whose first line names a file (``# myapp/tasks.py``) is written to
  that file, as a reader saves it; any other ``python`` block is executed;
- a ``sh`` block runs in ``bash -e``, with the variables the page's earlier blocks exported
  (``export SQLQ_DB=...`` holds for the blocks after it), ``sqlq`` and ``python`` those of
  the test's venv. A worker, which would run until stopped, gets ``--burst`` (it runs what
  is queued, then exits) and ``sqlq top`` gets ``--once``: the two changes made to what the
  page says (a worker started in the background, ``&``, is stopped by its block);
- a ``text`` block is output shown to the reader, not code;
- a block of any language that opens with ``# fragment: why`` (among its first comment
  lines: a script keeps its ``#!`` line first) is not run: a reader sees the same line
  (it needs a checkout, a server, or runs until stopped).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pytest
from sybil import Document, Example, Region
from sybil.parsers.markdown import CodeBlockParser

import sqlq
from tests.conftest import ROOT

pytestmark = [pytest.mark.slow, pytest.mark.timeout(180)]

#: Every page: README.md, then docs/ (a new page joins by being there).
PAGES = ["README.md", *sorted(f"docs/{p.name}" for p in (ROOT / "docs").glob("*.md"))]
BIN_DIR = Path(sys.executable).parent
FILE_BLOCK = re.compile(r"# ([\w./-]+\.py)\b")
#: "# fragment: why" among the comment lines that open a block (after a #! line).
FRAGMENT = re.compile(r"\s*(?:(?:#|--).*\n)*?(?:#|--) fragment: \S")  # -- in SQL
#: A worker runs until stopped: here it runs what is queued, then exits.
WORKER = re.compile(r"^(\s*(?:\S+=\S+\s+)*(?:opentelemetry-instrument .*?)?sqlq\b[^#\n]*?\bwork)\b",
                    re.M)
TOP = re.compile(r"^(\s*sqlq\b[^#\n]*?\btop)\b(?![^#\n]*--once)", re.M)


class Blocks(CodeBlockParser):
    """Every fenced block of a page, whatever its language, evaluated by :class:`Page`."""

    language = "any"

    def __init__(self, page: Page | None = None) -> None:
        super().__init__(evaluator=None if page is None else page.run)

    def __call__(self, document: Document) -> Iterable[Region]:
        for region in self.lexers(document):
            region.parsed = (str(region.lexemes["arguments"]), str(region.lexemes["source"]))
            region.evaluator = self._evaluator
            yield region


class Page:
    """One page's blocks, run in ``home`` one after another."""

    def __init__(self, home: Path, state: Path) -> None:
        self.home = home
        self.state = state  # the shell variables exported so far
        self.ran: list[str] = []
        self.fragments: list[str] = []

    def run(self, example: Example) -> None:
        language, source = example.parsed
        where = f"{Path(example.path).name} line {example.line}"
        if FRAGMENT.match(source) or source.lstrip().startswith('--8<-- "examples/'):
            # the second: a file of examples/ the site shows whole, run by its own test
            self.fragments.append(where)
            return
        if language == "text":  # output shown, not code to type
            self.fragments.append(f"{where} (output)")
            return
        if language == "python":
            self.python(source, where, example.namespace)
        elif language == "sh":
            self.shell(source, where)
        else:
            raise AssertionError(f"{where}: a ```{language} block that neither runs here nor "
                                 "starts with '# fragment: why'")
        self.ran.append(where)

    def python(self, source: str, where: str, namespace: dict[str, Any]) -> None:
        named = FILE_BLOCK.match(source)
        if named:
            target = self.home / named.group(1)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(source)
            return
        exec(compile(source, where, "exec"), namespace)  # noqa: S102 - the page's own code

    def shell(self, source: str, where: str) -> str:
        script = "\n".join(line if re.search(r"&\s*(#.*)?$", line)  # stopped by the block
                           else TOP.sub(r"\1 --once", WORKER.sub(r"\1 --burst", line))
                           for line in source.splitlines())
        env = {k: v for k, v in os.environ.items() if not k.startswith("SQLQ_")}
        env["PATH"] = f"{BIN_DIR}{os.pathsep}{env['PATH']}"
        program = (f"[ -f {self.state} ] && . {self.state}\nset -e\n{script}\n"
                   f"export -p > {self.state}\n")
        done = subprocess.run(["bash", "-c", program], cwd=self.home, env=env,
                              capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, f"{where} exited {done.returncode}:\n{script}\n{done.stderr}"
        return done.stdout


def blocks(page: str) -> list[tuple[str, str]]:
    """The page's fenced blocks, (language, source), as Sybil finds them."""
    path = ROOT / page
    return [region.parsed for region in Blocks()(Document(path.read_text(), str(path)))]


@pytest.mark.parametrize("page", PAGES)
def test_every_block_runs_in_page_order_or_is_marked_a_fragment(
        page: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.chdir(home)
    monkeypatch.syspath_prepend(str(home))  # as `python` run there finds myapp/
    for name in [k for k in os.environ if k.startswith("SQLQ_")]:
        monkeypatch.delenv(name)
    runner = Page(home, tmp_path / "exported.sh")
    document = Document.parse(str(ROOT / page), Blocks(runner))
    try:
        for example in document:
            example.evaluate()
    finally:
        for name, module in list(sys.modules.items()):  # a page's myapp is not the next's
            if str(home) in str(getattr(module, "__file__", None) or ""):
                del sys.modules[name]
        for value in document.namespace.values():
            close = getattr(value, "close", None)
            if type(value).__module__.startswith(("sqlq", "sqlite3")) and callable(close):
                close()
    # A sample whose job fails buries it without a word (newcomer.md #6: handle() undefined)
    for db in sorted(home.glob("**/*.db")):
        with sqlq.Queue(str(db)) as q:
            buried = q.stats()["current-jobs-buried"]
            assert buried == 0, f"{page}: {db.name} holds {buried} buried job(s)"
    print(f"{page}: {len(runner.ran)} blocks ran, fragments at {runner.fragments}")


def _with_getting_started_tasks(tmp_path: Path) -> tuple[Path, Page]:
    """A fresh home with getting started's ``myapp/tasks.py`` written, and its Page."""
    home = tmp_path / "home"
    (home / "var").mkdir(parents=True)
    page = Page(home, tmp_path / "exported.sh")
    tasks = next(src for _, src in blocks("docs/getting-started.md")
                 if src.startswith("# myapp/tasks.py"))
    page.python(tasks, "getting-started.md", {})
    return home, page


def test_tracings_first_look_prints_each_run_as_a_span(tmp_path: Path) -> None:
    """newcomer.md #37: ``opentelemetry-instrument`` was "command not found" after the
    documented install, then failed for want of an OTLP exporter. The page's block runs
    (its pip lines aside: the test venv has those packages) on getting started's tasks."""
    home, page = _with_getting_started_tasks(tmp_path)
    page.shell("python -c 'from myapp.tasks import send_welcome_email as s; s.put(7, \"a@b.c\")'",
               "a put")
    block = next(src for _, src in blocks("docs/tracing.md") if "=console" in src)
    assert "pip install opentelemetry-sdk opentelemetry-distro" in block
    out = page.shell("\n".join(line for line in block.splitlines()
                               if not line.startswith("pip install")), "tracing.md")
    assert '"name": "process emails"' in out and '"messaging.sqlq.job.outcome": "deleted"' in out


def test_the_postgresql_pages_move_runs_on_a_real_server(tmp_path: Path, pg_url: str) -> None:
    """docs/postgres.md's first block, its placeholder URL replaced by a throwaway
    server's database (its pip line aside): copy a file's jobs, then work them there."""
    home, page = _with_getting_started_tasks(tmp_path)
    body = b'{"task": "myapp.tasks.send_welcome_email", "args": [7, "a@b.c"], "kwargs": {}}'
    with sqlq.Queue(str(home / "app.db")) as q:
        q.put(body, tube="emails")
    block = next(src for _, src in blocks("docs/postgres.md") if "sqlq copy app.db" in src)
    placeholder = "postgresql://app@db.internal/app"
    assert placeholder in block and "pip install" in block
    out = page.shell("\n".join(line.replace(placeholder, pg_url) for line in block.splitlines()
                               if not line.startswith("pip install")), "postgres.md")
    assert "copied 1 job" in out and "welcome mail to a@b.c for user 7" in out, out
    with sqlq.Queue(pg_url) as q:
        assert q.stats()["total-jobs"] == 1 and q.stats()["current-jobs-ready"] == 0
