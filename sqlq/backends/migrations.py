"""Numbered migration files, as every backend keeps them in its ``migrations/`` folder.

``NNNN_snake_case.sql``, numbered 1, 2, 3 … without gaps, DDL only, never edited
once released (CONTRIBUTING.md): a backend applies those above the version its
database records, in order, in one transaction.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import NamedTuple

from ..errors import SchemaError

_NAME = re.compile(r"^(\d{4})_[a-z0-9_]+\.sql$")


class Migration(NamedTuple):
    version: int
    name: str
    sql: str


#: The folder of each backend's migrations, by the name ``sqlq --version`` gives it.
DIALECTS = {"sqlite": "SQLite", "postgres": "PostgreSQL"}


def latest_versions() -> dict[str, int]:
    """The schema version each backend's code migrates to, by backend name (``sqlq
    --version``): counted from the files, so psycopg need not be importable."""
    here = Path(__file__).resolve().parent
    return {name: len(load(here / folder / "migrations")) for folder, name in DIALECTS.items()}


def load(directory: Path) -> list[Migration]:
    """The migrations in directory, in order; SchemaError if it is missing or has gaps."""
    if not directory.is_dir():
        raise SchemaError(f"sqlq is installed without its migrations directory ({directory})")
    found = []
    for path in sorted(directory.iterdir()):
        match = _NAME.match(path.name)
        if match:
            found.append(Migration(int(match.group(1)), path.stem, path.read_text()))
    versions = [m.version for m in found]
    if versions != list(range(1, len(found) + 1)):
        raise SchemaError(f"migrations are not numbered 1..n without gaps: {versions}")
    return found
