"""Shared fixtures: a fresh database file per test, a fake clock, subprocess helpers."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

import sqlq

ROOT = Path(__file__).resolve().parent.parent


class FakeClock:
    """Milliseconds since the epoch that move only when a test says so."""

    def __init__(self, start_ms: int = 1_700_000_000_000) -> None:
        self.now = start_ms

    def __call__(self) -> int:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += int(seconds * 1000)


@pytest.fixture
def db_path(tmp_path: Path) -> str:
    return str(tmp_path / "q.db")


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def q(db_path: str) -> Iterator[sqlq.Queue]:
    """A queue on a fresh file, durability normal (fsync cost is not what tests check)."""
    queue = sqlq.Queue(db_path, durability="normal")
    yield queue
    queue.close()


@pytest.fixture
def fq(db_path: str, clock: FakeClock) -> Iterator[sqlq.Queue]:
    """A queue on a fresh file driven by the fake clock."""
    queue = sqlq.Queue(db_path, durability="normal", clock=clock)
    yield queue
    queue.close()


def spawn(code: str, *args: str, env: dict[str, str] | None = None,
          **kwargs: object) -> subprocess.Popen[str]:
    """Run a Python snippet in a new interpreter (a real, separate process)."""
    env = dict(os.environ if env is None else env, PYTHONPATH=str(ROOT))
    return subprocess.Popen(  # type: ignore[call-overload, no-any-return]
        [sys.executable, "-c", textwrap.dedent(code), *args],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, **kwargs,
    )
