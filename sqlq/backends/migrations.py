"""Numbered migration files, as every backend keeps them in its ``migrations/`` folder.

``NNNN_snake_case.sql``, numbered 1, 2, 3 … without gaps, DDL only, never edited
once released (CONTRIBUTING.md): a backend applies those above the version its
database records, in order, in one transaction.
"""

from __future__ import annotations

import os
import re
from typing import TYPE_CHECKING, NamedTuple

from ..errors import SchemaError

if TYPE_CHECKING:
    from pathlib import Path

_NAME = re.compile(r"^(\d{4})_[a-z0-9_]+\.sql$")


class Migration(NamedTuple):
    version: int
    name: str
    sql: str


def latest(directory: str) -> int:
    """The highest version in directory, from the files' names alone: what a database
    that needs no migration records, known without reading every file (which cost each
    process that opens a Queue milliseconds). :func:`load` checks the files."""
    names = os.listdir(directory) if os.path.isdir(directory) else []
    return max((int(m.group(1)) for m in map(_NAME.match, names) if m), default=0)


#: The folder of each backend's migrations, by the name ``sqlq --version`` gives it.
DIALECTS = {"sqlite": "SQLite", "postgres": "PostgreSQL"}


def latest_versions() -> dict[str, int]:
    """The schema version each backend's code migrates to, by backend name (``sqlq
    --version``): from the files' names, so psycopg need not be importable."""
    here = os.path.dirname(os.path.abspath(__file__))
    return {name: latest(os.path.join(here, folder, "migrations"))
            for folder, name in DIALECTS.items()}


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
