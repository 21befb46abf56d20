"""Migrations: applied in order on open, recorded, and refusing files they must not touch.

The tests that start other processes, moved from tests/unit/test_migrations.py
(which keeps the in-process ones)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

pytestmark = pytest.mark.sql_ascii  # as under tests/unit/: SQL_ASCII PostgreSQL too


def test_concurrent_first_opens_agree_on_one_file(tmp_path: Path) -> None:
    """Many processes creating the same new file at once: one file, one schema, no error."""
    from tests.conftest import spawn
    path = str(tmp_path / "race.db")
    procs = [spawn("import sys, sqlq; q = sqlq.Queue(sys.argv[1]); print(q.put(b'x'))", path)
             for _ in range(6)]
    ids = sorted(int(p.communicate(timeout=30)[0]) for p in procs)
    assert ids == list(range(1, 7))
    assert not [p for p in os.listdir(tmp_path) if "sqlq-init" in p]
