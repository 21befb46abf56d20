"""Dump the schema a fresh database gets from the migrations, per dialect.

``python migrations/generate.py`` (``make schema``) rewrites ``migrations/<dialect>/schema.sql``
from the migrations beside it: SQLite's ``sqlite_master`` and, through a throwaway
PostgreSQL server (tests/pgserver.py), ``pg_dump --schema-only`` normalised. The tests
(tests/unit/test_schema.py) apply the migrations and compare with these files, so a change
to the schema is a reviewed change to schema.sql too.

``python migrations/generate.py --compare DIALECT DIR_A DIR_B`` prints the diff of the
schemas two folders of migrations make (how the squash into 0001 was checked).
"""

from __future__ import annotations

import difflib
import re
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
DIALECTS = ("sqlite", "postgres")
_NAME = re.compile(r"^(\d{4})_[a-z0-9_]+\.sql$")


def migration_files(directory: Path) -> list[Path]:
    return sorted(p for p in directory.iterdir() if _NAME.match(p.name))


def sqlite_dump(path: str) -> str:
    """Tables, indexes and triggers of the file at path, then every row the migrations
    wrote (but sqlq_schema's, whose times differ)."""
    import apsw

    with apsw.Connection(path) as conn:
        rows = conn.execute(
            "SELECT type, name, sql FROM sqlite_master "
            "WHERE sql IS NOT NULL AND name NOT LIKE 'sqlite_%' ORDER BY type DESC, name"
        ).fetchall()
        out = [f"-- {kind} {name}\n{sql};\n\n" for kind, name, sql in rows]
        for (table,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table' "
                                     "AND name NOT LIKE 'sqlite_%' AND name != 'sqlq_schema' "
                                     "ORDER BY name").fetchall():
            for column in conn.execute(f"PRAGMA table_xinfo({table})").fetchall():
                out.append(f"-- column {table}: {column!r}\n")
            for row in conn.execute(f"SELECT * FROM {table} ORDER BY 1").fetchall():
                out.append(f"-- row {table}: {row!r}\n")
    return "".join(out)


def canonical(sql: str) -> str:
    """SQL text without its comments, its whitespace made one space and none beside
    parentheses and commas: how two schemas are compared when one was squashed (SQLite
    keeps each CREATE as written, with ALTER TABLE's columns spliced into the text)."""
    sql = re.sub(r"--[^\n]*", "", sql)
    sql = re.sub(r"\s+", " ", sql)
    return re.sub(r" ?([(),]) ?", r"\1", sql).strip()


def sqlite_schema(directory: Path) -> str:
    """sqlite_dump of a new file ``directory``'s migrations made, as migrate.py applies
    them (the version table, then each migration in its own transaction)."""
    import apsw

    from sqlq.backends.sqlite.migrate import _CREATE_VERSION_TABLE

    with tempfile.TemporaryDirectory() as tmp:
        path = str(Path(tmp) / "fresh.db")
        with apsw.Connection(path) as conn:
            conn.execute(_CREATE_VERSION_TABLE)
            for migration in migration_files(directory):
                with conn:
                    conn.execute(migration.read_text())
        return sqlite_dump(path)


def postgres_dump(pg_dump: str, url: str) -> str:
    """pg_dump --schema-only of the database at url, without its comments, SET lines and
    blank lines, then every row the migrations wrote (but sqlq_schema's)."""
    import psycopg

    dump = subprocess.run(
        [pg_dump, "--schema-only", "--no-owner", "--no-privileges", "-d", url],
        capture_output=True, text=True, check=True).stdout
    lines = [line for line in dump.splitlines()
             if line.strip() and not line.startswith(("--", "SET ", "SELECT pg_catalog.", "\\"))]
    out = "\n".join(lines) + "\n"  # (\restrict lines: a random key, PostgreSQL 17.6+)
    with psycopg.connect(url) as conn:
        tables = [r[0] for r in conn.execute(
            "SELECT tablename FROM pg_tables WHERE schemaname = 'public' "
            "AND tablename != 'sqlq_schema' ORDER BY 1")]
        for table in tables:
            for row in conn.execute(f"SELECT * FROM {table} ORDER BY 1"):
                out += f"-- row {table}: {tuple(row)!r}\n"
    return out


def postgres_schema(server: object, directory: Path) -> str:
    """postgres_dump of a new database ``directory``'s migrations made on server (a
    tests/pgserver.py PgServer), each in its own transaction as migrate.py applies them."""
    import psycopg

    from sqlq.backends.postgres.migrate import _CREATE_VERSION_TABLE
    from tests.pgserver import PgServer

    assert isinstance(server, PgServer)
    name = re.sub(r"[^a-z0-9_]", "_", f"schema_{directory.parent.name}_{directory.name}")
    url = server.create_database(name[:60].lower())
    try:
        with psycopg.connect(url) as conn:
            conn.execute(_CREATE_VERSION_TABLE)
        for migration in migration_files(directory):
            with psycopg.connect(url) as conn:
                conn.execute(migration.read_text().encode())
        return postgres_dump(str(server._bin("pg_dump")), url)
    finally:
        server.drop_database(name[:60].lower())


def schemas(directories: dict[str, Path]) -> dict[str, str]:
    """The schema each dialect's folder of migrations makes, by dialect."""
    out = {}
    if "sqlite" in directories:
        out["sqlite"] = sqlite_schema(directories["sqlite"])
    if "postgres" in directories:
        sys.path.insert(0, str(ROOT))
        from tests.pgserver import PgServer

        with PgServer() as server:
            out["postgres"] = postgres_schema(server.start(), directories["postgres"])
    return out


def canonical_lines(dump: str) -> str:
    """A dump with each statement canonical (see canonical), one a line."""
    kept = [line for line in dump.splitlines() if line.startswith(("-- column ", "-- row "))]
    rest = "\n".join(line for line in dump.splitlines() if line not in kept)
    statements = [canonical(s) for s in re.split(r";\n", rest)]
    return "\n".join([s for s in statements if s] + kept) + "\n"


def main(argv: list[str]) -> int:
    if argv[:1] == ["--compare"]:
        dialect, a, b = argv[1:4]
        made = [schemas({dialect: Path(d)})[dialect] for d in (a, b)]
        if dialect == "sqlite":  # pg_dump's text is canonical already, function bodies as written
            made = [canonical_lines(text) for text in made]
        diff = list(difflib.unified_diff(made[0].splitlines(), made[1].splitlines(), a, b,
                                         lineterm=""))
        print("\n".join(diff) or f"{dialect}: identical ({len(made[0].splitlines())} lines)")
        return 1 if diff else 0
    for dialect, text in schemas({d: HERE / d for d in DIALECTS}).items():
        (HERE / dialect / "schema.sql").write_text(text)
        print(f"wrote migrations/{dialect}/schema.sql")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
