"""docs/workflows.md's fan-out/fan-in example, run as a reader runs it: its two Python
files written out, its shell block run top to bottom (a real worker in the background,
the producer waiting for the report), and the output it shows compared."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.system.test_docs_run import _blocks

pytestmark = pytest.mark.timeout(120)

DOC = "docs/workflows.md"


def _env() -> dict[str, str]:
    """The environment without sqlq's settings, this venv's commands first on PATH."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("SQLQ_")}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env['PATH']}"
    return env


def _block(language: str, start: str) -> str:
    found = [b for b in _blocks(language, DOC) if b.startswith(start)]
    assert len(found) == 1, (start, found)
    return found[0]


@pytest.mark.slow
def test_the_chord_example_runs_as_written(tmp_path: Path) -> None:
    for name in ("photos.py", "album.py"):
        (tmp_path / name).write_text(_block("python", f"# {name}"))
    script = _block("sh", "mkdir -p photos")  # the page makes its three photos itself
    done = subprocess.run(["sh", "-e", "-c", script], cwd=tmp_path, env=_env(),
                          capture_output=True, text=True, timeout=90)
    assert done.returncode == 0, done.stderr
    shown = re.search(r"which prints, for three photos:\n\n```\n(.*?)```",
                      (Path(__file__).parents[2] / DOC).read_text(), re.S)
    assert shown is not None
    assert done.stdout == shown.group(1), (done.stdout, done.stderr)
