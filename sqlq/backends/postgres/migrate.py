"""Schema migrations: numbered ``.sql`` files in ``migrations/``, applied in order, each
recorded in ``sqlq_schema`` (as SQLite's ``migrate.py`` does for a file).

Migrations are forward-only and never edited once released (see CONTRIBUTING). A
database stamped by a newer sqlq is refused before anything is written to it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ...errors import SchemaError
from ..migrations import Migration, load


def migrations_dir() -> Path:
    """The migrations beside this module (shipped inside the package)."""
    return Path(__file__).resolve().parent / "migrations"


def load_migrations(directory: Path | None = None) -> list[Migration]:
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
        SchemaError: the database was written by a newer sqlq (the message names
            ``location``).
    """
    conn.execute("SELECT pg_advisory_xact_lock(hashtextextended('sqlq migrate', 0))")
    conn.execute(_CREATE_VERSION_TABLE)
    row = conn.execute("SELECT coalesce(max(version), 0) FROM sqlq_schema").fetchone()
    current = int(row[0]) if row else 0
    if current > LATEST:
        raise SchemaError(f"{location}: it was written by a newer sqlq (schema "
                          f"{current}, this sqlq knows {LATEST}); upgrade sqlq")
    for migration in MIGRATIONS:
        if migration.version > current:
            conn.execute(migration.sql)  # DDL only: no parameters, several statements
            conn.execute("INSERT INTO sqlq_schema (version, name, applied_at) "
                         "VALUES (%s, %s, %s)", (migration.version, migration.name, now_ms))
    return LATEST
