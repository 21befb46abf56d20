"""What a first user copies, run as written: the "Enqueue in your own transaction"
snippets of docs/transactions.md one after another (a stand-in worker completes their
jobs), and ``make demo``'s closing hints. The pages whose every block runs in order
(README.md, getting started, docs/shell.md...) are test_docs_examples.py's."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests import forkserver
from tests.conftest import ROOT

pytestmark = pytest.mark.timeout(120)


def _blocks(language: str, doc: str = "README.md") -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", (ROOT / doc).read_text(), re.S)


def test_the_own_transaction_snippets_run_one_after_another(tmp_path: Path) -> None:
    """As a reader follows them, in one process and one directory; the second one's
    ``q.result`` waits for a worker elsewhere, which a stand-in plays."""
    snippets = [b for b in _blocks("python", "docs/transactions.md") if "orders" in b
                and "async " not in b and "INSERT" in b]
    assert len(snippets) == 3, snippets
    worker = forkserver.Popen(
        [sys.executable, "-c", "import sqlq, time\n"
         "import os\n"
         "while not os.path.exists('app.db'): time.sleep(0.05)\n"
         "q = sqlq.Queue('app.db', init=True)\n"
         "while True:\n"
         "    job = q.reserve('emails', timeout=None)\n"
         "    job.complete(b'sent')\n"],
        cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(ROOT)},
        stderr=subprocess.PIPE, text=True)
    try:
        program = "\n".join(snippets) + "\nprint('orders', db.execute(" \
            "'SELECT count(*) FROM orders').fetchone()[0])\n"
        done = forkserver.run([sys.executable, "-c", program], cwd=tmp_path,
                              env={**os.environ, "PYTHONPATH": str(ROOT)},
                              capture_output=True, text=True, timeout=90)
    finally:
        worker.kill()
        worker.wait()
    assert done.returncode == 0, (done.stderr, worker.stderr.read() if worker.stderr else "")
    assert "b'sent'" in done.stdout and "orders 3" in done.stdout, done.stdout


def test_getting_started_tasks_module_puts_nothing_on_import(tmp_path: Path) -> None:
    module = next(b for b in _blocks("python", "docs/getting-started.md")
                  if b.startswith("# myapp/tasks.py"))
    assert ".put(" not in module  # every worker process imports it: a put there runs N times


@pytest.mark.slow
def test_make_demo_hints_run(tmp_path: Path) -> None:
    demo = forkserver.run([sys.executable, "-m", "sqlq.demo", str(tmp_path / "demo.db")],
                          cwd=ROOT, capture_output=True, text=True, timeout=90,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert demo.returncode == 0, demo.stderr
    tail = demo.stdout.split("\nTry:", 1)[1].splitlines()
    hints = [line.strip() for line in tail if line.strip()]
    assert len(hints) == 2, demo.stdout
    for hint in hints:
        done = subprocess.run(hint.split(), capture_output=True, text=True, timeout=30)
        assert done.returncode == 0, (hint, done.stderr)
    assert "always fails" in done.stdout  # the buried job, with its reason
