"""Databases as other sqlq versions left them, holding jobs: what the migration tests
open (tests/unit/test_migrations.py, tests/integration/test_migrations.py).

Nothing is released yet: the migrations of the pre-release sqlq were squashed into each
dialect's 0001 before 0.1.0, so a database they made is refused, never upgraded. A
pre-release database here records the pre-release migrations' names up to its version
(what such a sqlq wrote into sqlq_schema) and holds jobs in the columns every schema had.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from sqlq.backends.migrations import PRE_RELEASE
from sqlq.backends.postgres import migrate as pg_migrate
from sqlq.backends.sqlite import migrate

from .conftest import ASCII_BACKEND, is_postgres

#: Every schema version a pre-release sqlq could leave, by dialect.
SQLITE_PRE_RELEASE = list(range(1, len(PRE_RELEASE["sqlite"]) + 2))
PG_PRE_RELEASE = list(range(1, len(PRE_RELEASE["postgres"]) + 2))
START_MS = 1_700_000_000_000
#: Jobs as every schema stores them (the columns all of them have):
#: (tube, state, delay_until, bury_reason, unique_key).
OLD_JOBS = [("old", 0, None, None, None), ("old", 1, START_MS + 60_000, None, None),
            ("old", 3, None, "failed before", None), ("old", 0, None, None, "key")]
_INSERT = ("INSERT INTO sqlq_jobs (tube, priority, state, delay_until, ttr, body, created_at,"
           " bury_reason, unique_key) VALUES ({p}, 1024, {p}, {p}, 60000, {p}, {p}, {p}, {p})")
#: sqlq_jobs as the pre-release schema 1 made it (both dialects' types are accepted by each).
_PRE_RELEASE_JOBS = {
    "sqlite": "CREATE TABLE sqlq_jobs (id INTEGER PRIMARY KEY AUTOINCREMENT, tube TEXT NOT NULL,"
              " priority INTEGER NOT NULL, state INTEGER NOT NULL, delay_until INTEGER,"
              " reserved_until INTEGER, ttr INTEGER NOT NULL, body BLOB NOT NULL,"
              " created_at INTEGER NOT NULL, bury_reason TEXT, unique_key TEXT)",
    "postgres": "CREATE TABLE sqlq_jobs (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,"
                " tube text NOT NULL, priority bigint NOT NULL, state smallint NOT NULL,"
                " delay_until bigint, reserved_until bigint, ttr bigint NOT NULL,"
                " body bytea NOT NULL, created_at bigint NOT NULL, bury_reason text,"
                " unique_key text)",
}


def _names(dialect: str, version: int) -> list[tuple[int, str]]:
    """What a pre-release sqlq recorded in sqlq_schema at ``version``."""
    names = ["0001_initial", *PRE_RELEASE[dialect]][:version]
    return list(enumerate(names, start=1))


def _sqlite(path: str, version: int | None) -> None:
    """A file holding OLD_JOBS (ids 1..4): at the current schema (version None), as this
    sqlq's migrations make it, or at a pre-release ``version``."""
    import apsw

    conn = apsw.Connection(path)
    with conn:
        conn.execute(migrate._CREATE_VERSION_TABLE)
        if version is None:
            records = [(m.version, m.name) for m in migrate.load_migrations()]
            for m in migrate.load_migrations():
                conn.execute(m.sql)
        else:
            records = _names("sqlite", version)
            conn.execute(_PRE_RELEASE_JOBS["sqlite"])
        for number, name in records:
            conn.execute("INSERT INTO sqlq_schema VALUES (?, ?, 0)", (number, name))
        for tube, state, until, reason, key in OLD_JOBS:
            conn.execute(_INSERT.format(p="?"), (tube, state, until, b"body", START_MS,
                                                 reason, key))
    conn.close()


def _postgres(url: str, version: int | None) -> None:
    """As _sqlite, a PostgreSQL database."""
    import psycopg

    with psycopg.connect(url) as conn:
        conn.execute(pg_migrate._CREATE_VERSION_TABLE)
        if version is None:
            records = [(m.version, m.name) for m in pg_migrate.MIGRATIONS]
            for m in pg_migrate.MIGRATIONS:
                conn.execute(m.sql.encode())
        else:
            records = _names("postgres", version)
            conn.execute(_PRE_RELEASE_JOBS["postgres"].encode())
        for number, name in records:
            conn.execute("INSERT INTO sqlq_schema VALUES (%s, %s, 0)", (number, name))
        for tube, state, until, reason, key in OLD_JOBS:
            conn.execute(_INSERT.format(p="%s"), (tube, state, until, b"body", START_MS,
                                                  reason, key))


def links(url: str) -> list[tuple[int, int, int]]:
    """(id, waiting_on, dependents) of every job, read beside the Queue."""
    sql = "SELECT id, waiting_on, dependents FROM sqlq_jobs ORDER BY id"
    if "://" in url:
        import psycopg

        with psycopg.connect(url) as pg:
            return [(row[0], row[1], row[2]) for row in pg.execute(sql)]
    import apsw  # the Queue's SQLite: a second copy of the library in this process (Python's
    # sqlite3) would drop the Queue's locks on the file when it closes its own handle
    conn = apsw.Connection(url)
    try:
        return [(row[0], row[1], row[2]) for row in conn.execute(sql)]
    finally:
        conn.close()


def empty_database(backend: str, tmp_path: Path, request: pytest.FixtureRequest
                   ) -> Iterator[str]:
    """An empty database of the test's backend (no sqlq tables yet), for a fixture to
    yield from: a file path, or a PostgreSQL database made for it and dropped after."""
    if not is_postgres(backend):
        yield str(tmp_path / "old.db")
        return
    server = request.getfixturevalue("pg_server")
    name = f"old_{os.getpid()}_{next(_NAMES)}"
    yield server.create_database(name, encoding="SQL_ASCII" if backend == ASCII_BACKEND
                                 else None)
    server.drop_database(name)


_NAMES = itertools.count()


def build_old(url: str, version: int | None = None) -> None:
    """The empty database at ``url`` with OLD_JOBS, at the current schema (None) or at a
    pre-release ``version``."""
    (_postgres if "://" in url else _sqlite)(url, version)
