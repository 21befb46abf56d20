"""The schema cannot change by accident.

Two nets, as procrastinate keeps: (1) the migrations, applied in order to a fresh
file, produce exactly the schema recorded in ``tests/schema.sql`` (compared with
``sqlite_master``), so a change to the schema is a reviewed change to that file
too; (2) a released migration file never changes (its SHA-256 is recorded here),
since files in the field were built by it: a change goes into a new migration.

After adding a migration on purpose: ``SQLQ_UPDATE_SCHEMA=1 pytest tests/unit/test_schema.py``
rewrites schema.sql; add the new file's hash to RELEASED once it is released.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import apsw

import sqlq
from sqlq.backends.sqlite import migrate

SNAPSHOT = Path(__file__).parents[1] / "schema.sql"

# Released migrations: name -> SHA-256 of the file's bytes. Never edit a line here.
RELEASED = {
    "0001_initial.sql": "07b343f27775996b9ee9d75a951fce3ed878b28517cb21df0f2a7ddb15229215",
    "0002_results_and_topics.sql":
        "3878f205fb6db9b01c167a75d8c7febc1971d7a489e64b13c799c80eed7c4753",
    "0003_periodic_slots.sql": "6229af4b5b3d1020cb2054fe6f34e54a70a23cc44227bc93d4ca89a2b4f40bb9",
    "0004_job_delay.sql": "1706dd00fd053190f16fb2d02f3cdcf15c701cfc827cb8fa08dc753570889e5a",
}


def dump_schema(path: str) -> str:
    """Every table, index and trigger in the file, in a stable order, as SQL text."""
    with apsw.Connection(path) as conn:
        rows = conn.execute(
            "SELECT type, name, sql FROM sqlite_master "
            "WHERE sql IS NOT NULL AND name NOT LIKE 'sqlite_%' ORDER BY type DESC, name"
        ).fetchall()
    return "".join(f"-- {kind} {name}\n{sql};\n\n" for kind, name, sql in rows)


def test_migrations_produce_the_recorded_schema(tmp_path: Path) -> None:
    path = str(tmp_path / "fresh.db")
    sqlq.Queue(path).close()
    schema = dump_schema(path)
    if os.environ.get("SQLQ_UPDATE_SCHEMA"):
        SNAPSHOT.write_text(schema)
    assert schema == SNAPSHOT.read_text(), (
        "the migrations no longer produce tests/schema.sql: if that is intended, "
        "rerun with SQLQ_UPDATE_SCHEMA=1 and review the diff")


def test_released_migrations_never_change() -> None:
    for name, digest in RELEASED.items():
        data = (migrate.migrations_dir() / name).read_bytes()
        assert hashlib.sha256(data).hexdigest() == digest, (
            f"migrations/{name} was edited after its release: add a new migration instead")
