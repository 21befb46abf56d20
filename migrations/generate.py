"""Dump the schema a fresh database gets from the migrations, per dialect.

``python migrations/generate.py`` (``make schema``) rewrites ``migrations/<dialect>/schema.sql``
from the migrations beside it: SQLite's ``sqlite_master`` and, through a throwaway
PostgreSQL server (tests/pgserver.py), ``pg_dump --schema-only`` normalised. The tests
(tests/unit/test_schema.py) apply the migrations and compare with these files, so a change
to the schema is a reviewed change to schema.sql too.

``python migrations/generate.py --compare DIALECT DIR_A DIR_B`` prints the diff of the
schemas two folders of migrations make (how the squash into 0001 was checked);
``--freeze VERSION`` (run when VERSION is released, in the commit that gives it its
CHANGELOG heading) records the SHA-256 of every migration not yet frozen in
``migrations/frozen.txt``: tests/unit/test_schema.py then fails if one changes or goes.
``--dump sqlite PATH`` / ``--dump postgres URL PG_DUMP`` prints a database's dump
(``make release-check`` compares what the installed wheel made with schema.sql).
"""

from __future__ import annotations

import difflib
import hashlib
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


FROZEN = HERE / "frozen.txt"
_RELEASE_HEADING = re.compile(r"^## \[?v?(\d+\.\d+\.\d+[^\]\s]*)\]?", re.M)


def released_versions(changelog: str) -> list[str]:
    """The versions CHANGELOG.md gives a heading ("## [0.1.0] - 2026-..."), newest
    first; "## Unreleased" is none."""
    return _RELEASE_HEADING.findall(changelog)


def frozen_records(text: str) -> list[tuple[str, str, str]]:
    """(release, path under migrations/, SHA-256) of each line of frozen.txt."""
    rows = [line.split() for line in text.splitlines() if line.strip() and line[0] != "#"]
    return [(row[0], row[1], row[2]) for row in rows]


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def freeze(folder: Path, version: str, frozen: str) -> str:
    """frozen.txt's lines for the migrations in folder (migrations/) that it does not
    record yet, as released in version."""
    known = {path for _, path, _ in frozen_records(frozen)}
    lines = []
    for dialect in DIALECTS:
        for migration in migration_files(folder / dialect):
            name = f"{dialect}/{migration.name}"
            if name not in known:
                lines.append(f"{version} {name} {_digest(migration)}\n")
    return "".join(lines) or f"{version} - -\n"  # a release that added none


def frozen_problems(folder: Path, changelog: str, frozen: str) -> list[str]:
    """What breaks the rule that released migrations never change, one line each: a
    release (a CHANGELOG heading) whose migrations were not frozen, a record of a version
    never released, a released migration edited or gone."""
    released = released_versions(changelog)
    records = frozen_records(frozen)
    problems = [f"{v} is released (CHANGELOG.md) but not frozen: run "
                f"`python migrations/generate.py --freeze {v}`"
                for v in released if v not in {r[0] for r in records}]
    for version, name, digest in records:
        path = folder / name
        if version not in released:
            problems.append(f"frozen.txt records {name} as released in {version}, "
                            "which CHANGELOG.md has no heading for")
        if name == "-":
            continue
        if not path.is_file():
            problems.append(f"migrations/{name}, released in {version}, is gone")
        elif _digest(path) != digest:
            problems.append(f"migrations/{name}, released in {version}, was edited: "
                            "add a new migration instead")
    return problems


def canonical_lines(dump: str) -> str:
    """A dump with each statement canonical (see canonical), one a line."""
    kept = [line for line in dump.splitlines() if line.startswith(("-- column ", "-- row "))]
    rest = "\n".join(line for line in dump.splitlines() if line not in kept)
    statements = [canonical(s) for s in re.split(r";\n", rest)]
    return "\n".join([s for s in statements if s] + kept) + "\n"


def main(argv: list[str]) -> int:
    if argv[:1] == ["--freeze"]:
        with FROZEN.open("a") as out:
            out.write(added := freeze(HERE, argv[1], FROZEN.read_text()))
        print(added, end="")
        return 0
    if argv[:1] == ["--dump"]:
        dialect, target = argv[1:3]
        sys.stdout.write(sqlite_dump(target) if dialect == "sqlite"
                         else postgres_dump(argv[3], target))
        return 0
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
