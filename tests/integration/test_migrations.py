"""Migrations: applied in order on open, recorded, and refusing files they must not touch.

The tests that start other processes, moved from tests/unit/test_migrations.py
(which keeps the in-process ones)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

import sqlq
from tests.oldschema import (
    OLD_JOBS,
    PG_RELEASED,
    SQLITE_RELEASED,
    build_old,
    empty_database,
    links,
)

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


@pytest.fixture
def empty_url(backend: str, tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[str]:
    yield from empty_database(backend, tmp_path, request)


@pytest.mark.slow
def test_processes_opening_an_old_database_at_once_migrate_it_once(empty_url: str) -> None:
    """A deployment upgraded in place: workers and producers restart together on a
    database at the last schema before dependencies, with jobs in it. Each process
    opens it and puts a job after an old one: one migration, every put lands waiting,
    and deleting the old parent releases them all."""
    from tests.conftest import spawn
    version = max(PG_RELEASED if "://" in empty_url else SQLITE_RELEASED)
    build_old(empty_url, version)
    procs = [spawn("import sys, sqlq\n"
                   "with sqlq.Queue(sys.argv[1], durability='normal') as q:\n"
                   "    print(q.put(b'child', tube='new', after=1))\n", empty_url)
             for _ in range(4)]
    outputs = [p.communicate(timeout=60) for p in procs]
    assert all(p.returncode == 0 for p in procs), outputs
    children = sorted(int(out) for out, _ in outputs)
    assert len(set(children)) == 4 and min(children) > len(OLD_JOBS)
    with sqlq.Queue(empty_url, durability="normal") as q:
        assert q.stats()["current-jobs-waiting"] == 4
        q.delete(1)
        assert [q.peek(c).state for c in children] == ["ready"] * 4  # type: ignore[union-attr]
    assert links(empty_url)[0][1:] == (0, 0)  # the old delayed job: linked to nothing
