"""The schema cannot change by accident.

Two nets, as procrastinate keeps: (1) the migrations, applied by sqlq to a new database
of each dialect, produce exactly ``migrations/<dialect>/schema.sql`` (SQLite's
``sqlite_master``, PostgreSQL's ``pg_dump --schema-only``), so a change to the schema is
a reviewed change to that file too; (2) a released migration never changes: the hashes
``migrations/generate.py --freeze`` recorded in ``migrations/frozen.txt`` for each
release CHANGELOG.md names must still match (files in the field were built by them).

After adding a migration on purpose: ``python migrations/generate.py`` (``make schema``)
rewrites both schema.sql files.
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path
from types import ModuleType

import pytest

import sqlq
from tests.pgserver import PgServer

ROOT = Path(__file__).resolve().parents[2]
MIGRATIONS = ROOT / "migrations"
REGENERATE = "run `python migrations/generate.py` and review the diff"


def _generate() -> ModuleType:
    spec = importlib.util.spec_from_file_location("generate", MIGRATIONS / "generate.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


generate = _generate()


def test_sqlite_migrations_produce_schema_sql(tmp_path: Path) -> None:
    path = str(tmp_path / "fresh.db")
    sqlq.Queue(path).close()
    assert generate.sqlite_dump(path) == (MIGRATIONS / "sqlite" / "schema.sql").read_text(), (
        f"the migrations no longer produce migrations/sqlite/schema.sql: {REGENERATE}")


def test_postgres_migrations_produce_schema_sql(pg_server: PgServer) -> None:
    name = f"schema_{os.getpid()}"
    pg_server.drop_database(name)
    url = pg_server.create_database(name)
    try:
        sqlq.Queue(url).close()
        dump = generate.postgres_dump(str(pg_server._bin("pg_dump")), url)
    finally:
        pg_server.drop_database(name)
    assert dump == (MIGRATIONS / "postgres" / "schema.sql").read_text(), (
        f"the migrations no longer produce migrations/postgres/schema.sql: {REGENERATE}")


def test_released_migrations_never_change() -> None:
    changelog = (ROOT / "CHANGELOG.md").read_text()
    assert "## Unreleased" in changelog  # the headings are where released_versions looks
    assert generate.frozen_problems(MIGRATIONS, changelog,
                                    (MIGRATIONS / "frozen.txt").read_text()) == []


def test_the_freeze_catches_an_edit_a_loss_and_a_release_left_unfrozen(tmp_path: Path
                                                                        ) -> None:
    """The check above on a made-up project: what --freeze records holds until a released
    file is edited or deleted, or a release is added without a freeze."""
    for dialect in ("sqlite", "postgres"):
        (tmp_path / dialect).mkdir()
        (tmp_path / dialect / "0001_initial.sql").write_text(f"CREATE TABLE {dialect} (x);\n")
    changelog = "# Changelog\n\n## Unreleased\n\n## [0.1.0] - 2026-12-05\n"
    assert generate.released_versions(changelog) == ["0.1.0"]
    assert generate.frozen_problems(tmp_path, changelog, "") == [
        "0.1.0 is released (CHANGELOG.md) but not frozen: run "
        "`python migrations/generate.py --freeze 0.1.0`"]
    frozen = generate.freeze(tmp_path, "0.1.0", "")
    assert [r[:2] for r in generate.frozen_records(frozen)] == [
        ("0.1.0", "sqlite/0001_initial.sql"), ("0.1.0", "postgres/0001_initial.sql")]
    assert generate.frozen_problems(tmp_path, changelog, frozen) == []
    (tmp_path / "sqlite" / "0002_more.sql").write_text("CREATE TABLE more (x);\n")
    assert generate.frozen_problems(tmp_path, changelog, frozen) == []  # unreleased: free
    (tmp_path / "sqlite" / "0001_initial.sql").write_text("CREATE TABLE sqlite (x, y);\n")
    (tmp_path / "postgres" / "0001_initial.sql").unlink()
    assert generate.frozen_problems(tmp_path, changelog, frozen) == [
        "migrations/sqlite/0001_initial.sql, released in 0.1.0, was edited: "
        "add a new migration instead",
        "migrations/postgres/0001_initial.sql, released in 0.1.0, is gone"]
    later = "## [0.2.0] - 2027-01-01\n" + changelog
    assert generate.freeze(tmp_path, "0.2.0", frozen) == (
        f"0.2.0 sqlite/0002_more.sql {generate._digest(tmp_path / 'sqlite' / '0002_more.sql')}\n")
    frozen_again = frozen + generate.freeze(tmp_path, "0.2.0", frozen)
    assert generate.freeze(tmp_path, "0.3.0", frozen_again) == "0.3.0 - -\n"
    assert generate.frozen_problems(tmp_path, later, frozen)[0].startswith("0.2.0 is released")
    assert "which CHANGELOG.md has no heading for" in generate.frozen_problems(
        tmp_path, changelog, frozen_again)[-1]


@pytest.mark.parametrize("dialect", ["sqlite", "postgres"])
def test_migration_files_are_numbered_named_and_new(dialect: str) -> None:
    """Forward-only: 0001, 0002 ... without gaps, NNNN_snake_case.sql, and no name of a
    pre-release migration again (a database recording one is refused as pre-release)."""
    from sqlq.backends.migrations import PRE_RELEASE, load

    files = sorted(p.name for p in (MIGRATIONS / dialect).iterdir() if p.suffix == ".sql"
                   and p.name != "schema.sql")
    assert files, "no migrations found"
    for number, name in enumerate(files, start=1):
        assert generate._NAME.match(name) and name.startswith(f"{number:04d}_"), name
        assert name[:-4] not in PRE_RELEASE[dialect], name
    assert len(load(MIGRATIONS / dialect)) == len(files)
