"""Migrations: applied in order on open, recorded, and refusing files they must not touch.

The tests that start other processes, moved from tests/unit/test_migrations.py
(which keeps the in-process ones)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import apsw
import pytest

import sqlq
from tests.conftest import ROOT
from tests.oldschema import OLD_JOBS, build_old, empty_database

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
def test_processes_opening_a_new_database_at_once_migrate_it_once(empty_url: str) -> None:
    """A deployment's first start: workers and producers open an empty database together
    (on PostgreSQL: the advisory lock of migrate.py), each puts a job: the migration
    recorded once, every put lands, and the database opens as it is afterwards."""
    from tests.conftest import spawn
    procs = [spawn("import sys, sqlq\n"
                   "with sqlq.Queue(sys.argv[1], durability='normal') as q:\n"
                   "    print(q.put(b'first', tube='new'))\n", empty_url)
             for _ in range(4)]
    outputs = [p.communicate(timeout=60) for p in procs]
    assert all(p.returncode == 0 for p in procs), outputs
    assert sorted(int(out) for out, _ in outputs) == [1, 2, 3, 4]
    with sqlq.Queue(empty_url, durability="normal") as q:
        assert q.stats()["current-jobs-ready"] == 4
    from sqlq.backends import migrations

    every = migrations.load(migrations.directory("postgres" if "://" in empty_url else "sqlite"))
    assert _recorded(empty_url) == [(m.version, m.name) for m in every]


@pytest.mark.slow
def test_processes_opening_a_pre_release_database_at_once_all_refuse_it(empty_url: str
                                                                          ) -> None:
    """The same restart on a database a pre-release sqlq left (its last schema, with
    jobs): every process stops with the one-line refusal, and no job is touched."""
    from tests.conftest import spawn
    version = 19 if "://" in empty_url else 15
    build_old(empty_url, version)
    procs = [spawn("import sys, sqlq\n"
                   "try:\n"
                   "    sqlq.Queue(sys.argv[1])\n"
                   "except sqlq.SchemaError as e:\n"
                   "    print(e)\n", empty_url) for _ in range(4)]
    outputs = [p.communicate(timeout=60) for p in procs]
    assert all(p.returncode == 0 and "made by a pre-release sqlq" in out and out.count("\n") == 1
               for p, (out, _) in zip(procs, outputs, strict=True)), outputs
    assert len(_recorded(empty_url)) == version
    assert _rows(empty_url, "SELECT id FROM sqlq_jobs ORDER BY id") == [
        (i,) for i in range(1, len(OLD_JOBS) + 1)]


def _rows(url: str, sql: str) -> list[tuple[object, ...]]:
    """The rows of sql, read beside the Queue."""
    if "://" in url:
        import psycopg

        with psycopg.connect(url) as pg:
            return [tuple(row) for row in pg.execute(sql)]
    import apsw

    conn = apsw.Connection(url)
    try:
        return [tuple(row) for row in conn.execute(sql)]
    finally:
        conn.close()


def _recorded(url: str) -> list[tuple[object, ...]]:
    """sqlq_schema's rows (a SQL_ASCII database gives text to a plain client as bytes)."""
    return [(v, n.decode() if isinstance(n, bytes) else n) for v, n in
            _rows(url, "SELECT version, name FROM sqlq_schema ORDER BY version")]


def test_a_package_without_its_migrations_says_so_and_writes_nothing(tmp_path: Path) -> None:
    """sqlq's package copied without the top-level migrations/ (a hand-made vendoring, as
    the bench's snapshot once was): opening a new SQLite file is a SchemaError naming the
    missing directory, and the CLI's one line; the file gets no table (not a file without
    tables that fails later with "no such table")."""
    shutil.copytree(ROOT / "sqlq", tmp_path / "lib" / "sqlq",
                    ignore=shutil.ignore_patterns("__pycache__"))
    env = dict(os.environ, PYTHONPATH=str(tmp_path / "lib"))
    path = tmp_path / "q.db"
    code = """
import sys, sqlq
try:
    sqlq.Queue(sys.argv[1]).put(b"x")
except sqlq.SchemaError as exc:
    print(sqlq.__file__, exc, sep="\\n")
"""
    # subprocess, not spawn: a fork of the suite's warm interpreter has the checkout's sqlq
    out = subprocess.run([sys.executable, "-c", code, str(path)], env=env, capture_output=True,
                         text=True, timeout=60, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    where, message = out.stdout.splitlines()
    assert where.startswith(str(tmp_path / "lib")), where
    assert message.startswith("sqlq is installed without its migrations directory ("), message
    cli = subprocess.run([sys.executable, "-m", "sqlq", "--db", str(path), "put", "x"], env=env,
                         capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert cli.returncode == 1, cli
    assert cli.stderr.count("\n") == 1 and "without its migrations directory" in cli.stderr, \
        cli.stderr
    conn = apsw.Connection(str(path))
    assert conn.execute("SELECT count(*) FROM sqlite_master").fetchall() == [(0,)]
