"""``sqlq top`` in a real terminal: tmux runs it, capture-pane reads the screen.

Without tmux the tests fail and say what to install (``make test`` installs it).
"""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
import time
from collections import deque
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

import sqlq
from sqlq.cli.top import Sample, rates, render
from tests.servers import require

Tmux = Callable[..., str]


@pytest.fixture
def tmux(tmp_path: Path) -> Iterator[Tmux]:
    """Run tmux commands on a private server (its own socket), killed afterwards."""
    program = require("tmux")
    socket = str(tmp_path / "tmux.sock")

    def run(*args: str) -> str:
        done = subprocess.run([program, "-S", socket, *args], capture_output=True,
                              text=True, timeout=20)
        return done.stdout

    yield run
    run("kill-server")


@pytest.fixture
def db(tmp_path: Path) -> Path:
    path = tmp_path / "q.db"
    with sqlq.Queue(path) as q:
        q.put(b"a", tube="emails")
        q.put(b"b", tube="emails", delay=3600)
        q.put_many([b"c", b"d", b"e"], tube="thumbs")
        q.pause_tube("thumbs", 600)
    return path


def start_top(tmux: Tmux, db: Path, *args: str) -> None:
    top = shlex.join([sys.executable, "-m", "sqlq", "--db", str(db), "top", *args])
    # After top quits, the shell prints its exit status and keeps the pane open to read.
    tmux("new-session", "-d", "-x", "160", "-y", "30", "-s", "top",
         f"{top}; echo \"top exited $?\"; sleep 60")


def wait_for(tmux: Tmux, predicate: Callable[[str], bool], timeout: float = 15.0) -> str:
    deadline = time.monotonic() + timeout
    screen = ""
    while time.monotonic() < deadline:
        screen = tmux("capture-pane", "-p", "-t", "top")
        if predicate(screen):
            return screen
        time.sleep(0.1)
    raise AssertionError(f"the screen never matched:\n{screen}")


def test_top_shows_every_tube_and_quits_on_q(tmux: Tmux, db: Path) -> None:
    start_top(tmux, db, "--interval", "200ms")
    screen = wait_for(tmux, lambda s: "thumbs" in s)
    assert "sqlq top" in screen and str(db) in screen and "q: quit" in screen
    assert re.search(
        r"^TUBE\s+READY\s+URGENT\s+RESERVED\s+DELAYED\s+BURIED\s+WAITING\s+PAUSED$",
        screen, re.M), screen
    assert re.search(r"^emails\s+1\s+0\s+0\s+1\s+0\s+0$", screen, re.M), screen
    assert re.search(r"^thumbs\s+3\s+0\s+0\s+0\s+0\s+0\s+\d+m\d\ds$", screen, re.M), screen
    assert re.search(r"^ALL\s+4\s+0\s+0\s+1\s+0\s+0$", screen, re.M), screen

    # The view refreshes by itself, and throughput comes from successive samples.
    with sqlq.Queue(db) as q:
        for _ in range(10):
            q.put_many([b"x"] * 20, tube="emails")
            time.sleep(0.05)
    screen = wait_for(tmux, lambda s: re.search(r"^emails\s+201\s", s, re.M) is not None)
    wait_for(tmux, lambda s: (m := re.search(r"(\d+\.\d) put/s", s)) is not None
             and float(m[1]) > 0)

    tmux("send-keys", "-t", "top", "q")
    screen = wait_for(tmux, lambda s: "top exited" in s)
    assert "top exited 0" in screen
    assert "TUBE" not in screen  # the alternate screen is gone, the shell's is back


def test_top_quits_on_ctrl_c(tmux: Tmux, db: Path) -> None:
    start_top(tmux, db, "--interval", "1s")
    wait_for(tmux, lambda s: "emails" in s)
    tmux("send-keys", "-t", "top", "C-c")
    screen = wait_for(tmux, lambda s: "top exited" in s)
    assert "top exited 0" in screen and "Traceback" not in screen


def test_top_on_a_missing_database_is_an_error(tmux: Tmux, tmp_path: Path) -> None:
    start_top(tmux, tmp_path / "missing.db")
    screen = wait_for(tmux, lambda s: "top exited" in s)
    assert "no database at" in screen and "top exited 1" in screen


# --- the screen, without a terminal -----------------------------------------------------------


def sample(at: float, total: int, ready: int, tubes: dict[str, dict[str, int]]) -> Sample:
    return Sample(at, {"total-jobs": total, "current-jobs-ready": ready}, tubes)


def test_rates_come_from_successive_samples() -> None:
    old = sample(10.0, total=10, ready=10, tubes={})
    new = sample(12.0, total=30, ready=15, tubes={})
    assert rates(None, new) is None
    assert rates(old, new) == (10.0, 7.5)  # 20 puts in 2 s; 15 of them already done


def test_waiting_jobs_are_live_and_urgent_ones_count_once() -> None:
    old = Sample(0.0, {"total-jobs": 0}, {})
    new = Sample(1.0, {"total-jobs": 10, "current-jobs-ready": 4, "current-jobs-urgent": 4,
                       "current-jobs-waiting": 2}, {})
    assert rates(old, new) == (10.0, 4.0)  # 6 still live (the urgent among the ready)
    tubes = {"t": {"current-jobs-ready": 4, "current-jobs-waiting": 6}}
    lines = render(deque([new]), "title")
    assert lines[3].split()[6] == "WAITING"
    assert render(deque([Sample(0.0, {}, tubes)]), "x")[4].split() == [
        "t", "4", "0", "0", "0", "0", "6"]


def test_render_rows_totals_and_small_screens() -> None:
    tubes = {"b": {"current-jobs-ready": 2, "current-jobs-buried": 1},
             "a": {"current-jobs-delayed": 3, "pause-time-left": 90}}
    samples = deque([sample(0.0, 3, 2, tubes), sample(1.0, 5, 2, tubes)])
    lines = render(samples, "title", width=80, height=40)
    assert lines[0] == "title" and "2.0 put/s  2.0 done/s" in lines[1]
    assert [line.split()[0] for line in lines[3:]] == ["TUBE", "a", "b", "ALL"]
    assert lines[4].split() == ["a", "0", "0", "0", "3", "0", "0", "1m30s"]
    assert lines[6].split() == ["ALL", "2", "0", "0", "3", "1", "0"]
    short = render(samples, "title", width=12, height=5)
    assert len(short) == 5 and all(len(line) <= 12 for line in short)
    assert short[-1].startswith("... 3 more")
