"""Databases at released schema versions, holding jobs as those versions stored them: what
the migration tests open (tests/unit/test_migrations.py, tests/integration/test_migrations.py)."""

from __future__ import annotations

import itertools
import os
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from sqlq.backends.migrations import Migration
from sqlq.backends.postgres import migrate as pg_migrate
from sqlq.backends.sqlite import migrate

from .conftest import ASCII_BACKEND, is_postgres


def released_before_dependencies(load: Callable[[], list[Migration]]) -> list[int]:
    """The schema versions released before job dependencies (whose migration is named
    ``*_dependencies``): a database at each of them is in the field, with jobs."""
    names = {m.name.split("_", 1)[1]: m.version for m in load()}
    return list(range(1, names["dependencies"]))


SQLITE_RELEASED = released_before_dependencies(migrate.load_migrations)
PG_RELEASED = released_before_dependencies(pg_migrate.load_migrations)
START_MS = 1_700_000_000_000
#: Jobs as every released schema stores them (the columns all of them have):
#: (tube, state, delay_until, bury_reason, unique_key).
OLD_JOBS = [("old", 0, None, None, None), ("old", 1, START_MS + 60_000, None, None),
            ("old", 3, None, "failed before", None), ("old", 0, None, None, "key")]
_INSERT = ("INSERT INTO sqlq_jobs (tube, priority, state, delay_until, ttr, body, created_at,"
           " bury_reason, unique_key) VALUES ({p}, 1024, {p}, {p}, 60000, {p}, {p}, {p}, {p})")


def _old_sqlite(path: str, version: int) -> None:
    """A file at schema ``version`` holding OLD_JOBS, written as that sqlq wrote it: the
    migrations up to it, in one transaction, and the jobs (ids 1..4)."""
    import apsw

    conn = apsw.Connection(path)
    with conn:
        conn.execute("CREATE TABLE sqlq_schema (version INTEGER PRIMARY KEY, name TEXT NOT NULL,"
                     " applied_at INTEGER NOT NULL)")
        for m in migrate.load_migrations()[:version]:
            conn.execute(m.sql)
            conn.execute("INSERT INTO sqlq_schema VALUES (?, ?, 0)", (m.version, m.name))
        for tube, state, until, reason, key in OLD_JOBS:
            conn.execute(_INSERT.format(p="?"), (tube, state, until, b"body", START_MS,
                                                 reason, key))
    conn.close()


def _old_postgres(url: str, version: int) -> None:
    """As _old_sqlite, a PostgreSQL database at schema ``version``."""
    import psycopg

    with psycopg.connect(url) as conn:
        conn.execute(pg_migrate._CREATE_VERSION_TABLE)
        for m in pg_migrate.MIGRATIONS[:version]:
            conn.execute(m.sql.encode())
            conn.execute("INSERT INTO sqlq_schema VALUES (%s, %s, 0)", (m.version, m.name))
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


def build_old(url: str, version: int) -> None:
    """The empty database at ``url`` brought to schema ``version``, with OLD_JOBS."""
    (_old_postgres if "://" in url else _old_sqlite)(url, version)
