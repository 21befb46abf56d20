"""Schema migrations: numbered ``.sql`` files applied in order, each recorded.

Migrations are forward-only and never edited once released (see CONTRIBUTING).
A file stamped by a newer sqlq, or a database of another application, is refused
before anything is written to it.
"""

from __future__ import annotations

from typing import Any

from ...errors import SchemaError
from ..migrations import RELEASE_MARK, Migration, directory, latest, load, refusal
from .drivers import immediate


def migrations_dir() -> str:
    """migrations/sqlite (sqlq/_migrations/sqlite in the wheel)."""
    return directory("sqlite")


def load_migrations(directory: str | None = None) -> list[Migration]:
    return load(directory or migrations_dir())


LATEST = latest(migrations_dir())

_CREATE_VERSION_TABLE = """
CREATE TABLE IF NOT EXISTS sqlq_schema (
    version    INTEGER PRIMARY KEY,
    name       TEXT    NOT NULL,
    applied_at INTEGER NOT NULL
)"""


def schema_version(conn: Any, *, allow_foreign: bool = False) -> int:
    """The version recorded in the file, 0 for a file sqlq may initialise.

    Raises SchemaError for a file of another application (unless allow_foreign) or
    a file written by a newer sqlq.
    """
    tables = {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    if "sqlq_schema" not in tables:
        foreign = sorted(t for t in tables if not t.startswith(("sqlite_", "sqlq_")))
        if foreign and not allow_foreign:
            raise SchemaError(
                f"it holds another application's tables ({', '.join(foreign[:3])}"
                f"{', ...' if len(foreign) > 3 else ''}); pass init=True to add sqlq's tables"
            )
        return 0
    rows: Any = conn.execute("SELECT version, name FROM sqlq_schema").fetchall()
    version = max((int(row[0]) for row in rows), default=0)
    why = refusal("sqlite", version, [row[1] for row in rows], RELEASE_MARK["sqlite"] in tables,
                  LATEST)
    if why:
        raise SchemaError(why)
    return version


def migrate(conn: Any, now_ms: int, *, allow_foreign: bool = False) -> int:
    """Bring the schema up to date in one write transaction; return the version."""
    version = schema_version(conn, allow_foreign=allow_foreign)
    if version == LATEST and LATEST:
        return LATEST
    # Before anything is written: a package without its migrations (LATEST 0) says so
    # here rather than leaving a file without tables.
    migrations = load_migrations()
    if version == 0 and conn.execute("SELECT count(*) FROM sqlite_master").fetchall()[0][0] == 0:
        # A new file: its free pages can go back to the file system after a big drain
        # (Backend.reclaim, from the workers' prune). Set before the first table, or never
        # (an existing file keeps its mode: docs/operations.md, Disk space).
        conn.execute("PRAGMA auto_vacuum = INCREMENTAL")
    with immediate(conn):
        # Re-read under the write lock: another process may have migrated meanwhile.
        current = schema_version(conn, allow_foreign=allow_foreign)
        conn.execute(_CREATE_VERSION_TABLE)
        for migration in migrations:
            if migration.version > current:
                conn.execute(migration.sql)
                conn.execute(
                    "INSERT INTO sqlq_schema (version, name, applied_at) VALUES (?, ?, ?)",
                    (migration.version, migration.name, now_ms),
                )
    return LATEST
