"""Schema migrations: numbered ``.sql`` files in ``migrations/``, applied in order, each
recorded in ``sqlq_schema`` (as SQLite's ``migrate.py`` does for a file).

Migrations are forward-only and never edited once released (see CONTRIBUTING). A
database stamped by a newer sqlq is refused before anything is written to it.
"""

from __future__ import annotations

from typing import Any

from ...errors import SchemaError
from ..migrations import RELEASE_MARK, Migration, directory, load, refusal


def migrations_dir() -> str:
    """migrations/postgres (sqlq/_migrations/postgres in the wheel)."""
    return directory("postgres")


def load_migrations(directory: str | None = None) -> list[Migration]:
    return load(directory or migrations_dir())


MIGRATIONS = load_migrations()
LATEST = len(MIGRATIONS)

_CREATE_VERSION_TABLE = """
CREATE TABLE IF NOT EXISTS sqlq_schema (
    version    integer PRIMARY KEY,
    name       text    NOT NULL,
    applied_at bigint  NOT NULL
)"""


def migrate(conn: Any, now_ms: int, location: str) -> int:
    """Bring the schema up to date inside the transaction open on conn, one migrator at
    a time (a transaction-scoped advisory lock); return the version.

    Raises:
        SchemaError: the database was written by a newer sqlq, or by a pre-release one
            (the message names ``location``).
    """
    conn.execute("SELECT pg_advisory_xact_lock(hashtextextended('sqlq migrate', 0))")
    conn.execute(_CREATE_VERSION_TABLE)
    rows = conn.execute("SELECT version, name, to_regclass(%s) IS NOT NULL FROM sqlq_schema",
                        (RELEASE_MARK["postgres"],)).fetchall()
    current = max((int(row[0]) for row in rows), default=0)
    why = refusal("postgres", current, [row[1] for row in rows], bool(rows and rows[0][2]),
                  LATEST)
    if why:
        raise SchemaError(f"{location}: {why}")
    for migration in MIGRATIONS:
        if migration.version > current:
            conn.execute(migration.sql)  # DDL only: no parameters, several statements
            conn.execute("INSERT INTO sqlq_schema (version, name, applied_at) "
                         "VALUES (%s, %s, %s)", (migration.version, migration.name, now_ms))
    return LATEST
