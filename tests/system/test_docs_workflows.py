"""docs/workflows.md's fan-out/fan-in example, run as a reader runs it: its two Python
files written out, its shell block run top to bottom (a real worker in the background,
the producer waiting for the report), and the output it shows compared."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from tests.system.test_docs_run import _blocks, _env

pytestmark = pytest.mark.timeout(120)

DOC = "docs/workflows.md"


def _block(language: str, start: str) -> str:
    found = [b for b in _blocks(language, DOC) if b.startswith(start)]
    assert len(found) == 1, (start, found)
    return found[0]


@pytest.mark.slow
def test_the_chord_example_runs_as_written(tmp_path: Path) -> None:
    for name in ("photos.py", "album.py"):
        (tmp_path / name).write_text(_block("python", f"# {name}"))
    (tmp_path / "photos").mkdir()
    for i, size in enumerate((400, 400, 434), 1):  # 1234 bytes, as the page shows
        (tmp_path / "photos" / f"{i}.jpg").write_bytes(b"\xff" * size)
    script = _block("sh", "sqlq --db media.db work")
    done = subprocess.run(["sh", "-e", "-c", script], cwd=tmp_path, env=_env(tmp_path),
                          capture_output=True, text=True, timeout=90)
    assert done.returncode == 0, done.stderr
    shown = re.search(r"which prints, for three photos:\n\n```\n(.*?)```",
                      (Path(__file__).parents[2] / DOC).read_text(), re.S)
    assert shown is not None
    assert done.stdout == shown.group(1), (done.stdout, done.stderr)
