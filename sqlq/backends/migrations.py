"""Numbered migration files, one folder per dialect: ``migrations/<dialect>/`` at the top
of the checkout, shipped in the wheel as ``sqlq/_migrations/<dialect>/``.

``NNNN_snake_case.sql``, numbered 1, 2, 3 … without gaps, DDL only, never edited
once released (CONTRIBUTING.md): a backend applies those above the version its
database records, in order, in one transaction.
"""

from __future__ import annotations

import os
import re
from typing import NamedTuple

from ..errors import SchemaError

_NAME = re.compile(r"^(\d{4})_[a-z0-9_]+\.sql$")


class Migration(NamedTuple):
    version: int
    name: str
    sql: str


def directory(dialect: str) -> str:
    """The migrations of dialect ("sqlite", "postgres"): those the wheel ships inside the
    package, else (a checkout, an editable install) the top-level ``migrations/``. Plain
    ``os.path``: pathlib (and the urllib it imports) is not a put's to load."""
    package = os.path.dirname(os.path.dirname(os.path.realpath(__file__)))
    shipped = os.path.join(package, "_migrations", dialect)
    if os.path.isdir(shipped):
        return shipped
    return os.path.join(os.path.dirname(package), "migrations", dialect)


def latest(directory: str | os.PathLike[str]) -> int:
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
    return {name: latest(directory(folder)) for folder, name in DIALECTS.items()}


def load(directory: str | os.PathLike[str]) -> list[Migration]:
    """The migrations in directory, in order; SchemaError if it is missing or has gaps."""
    if not os.path.isdir(directory):
        raise SchemaError(f"sqlq is installed without its migrations directory ({directory})")
    found = []
    for name in sorted(os.listdir(directory)):
        match = _NAME.match(name)
        if match:
            with open(os.path.join(directory, name), encoding="utf-8") as f:
                found.append(Migration(int(match.group(1)), name[:-len(".sql")], f.read()))
    versions = [m.version for m in found]
    if versions != list(range(1, len(found) + 1)):
        raise SchemaError(f"migrations are not numbered 1..n without gaps: {versions}")
    return found


#: The migrations squashed into 0001 before the first release (0.1.0), by dialect. A
#: database that records one of them was made by a pre-release sqlq: its schema is not
#: any released one, and no migration leads from it (the names of later migrations must
#: differ from these: tests/unit/test_migrations.py).
PRE_RELEASE = {
    "sqlite": (
        "0002_results_and_topics", "0003_periodic_slots", "0004_job_delay",
        "0005_event_counters", "0006_duration_histograms", "0007_ids_without_autoincrement",
        "0008_attempts", "0009_tube_totals", "0010_dependencies", "0011_trace",
        "0012_workers", "0013_control", "0014_limits", "0015_attempt_location"),
    "postgres": (
        "0002_event_counters", "0003_claim_functions", "0004_duration_histograms",
        "0005_batch_claim", "0006_claim_generic_plan", "0007_claim_by_id", "0008_owners",
        "0009_attempts", "0010_tube_totals", "0011_dependencies", "0012_trace",
        "0013_workers", "0014_control", "0015_limits", "0016_capped_wakeup",
        "0017_claim_floors", "0018_server_epoch", "0019_attempt_location"),
}
#: A table the released 0001 makes and the pre-release 0001 (named alike) did not: a
#: database at version 1 without it is a pre-release one.
RELEASE_MARK = {"sqlite": "sqlq_last_id", "postgres": "sqlq_counters"}


def refusal(dialect: str, version: int, names: list[str], has_mark: bool,
            known: int) -> str | None:
    """Why a database recording ``version`` (the migrations ``names``) cannot be opened
    by code that knows ``known`` versions, or None if it can."""
    if version == 0:
        return None
    if any(n in PRE_RELEASE[dialect] for n in names) or not has_mark:
        return (f"it was made by a pre-release sqlq ({DIALECTS[dialect]} schema {version} "
                "from before 0.1.0), which this sqlq cannot upgrade; finish its jobs with "
                "the sqlq that made it, then start a new database")
    if version > known:
        return (f"it was written by a newer sqlq (schema {version}, this sqlq knows "
                f"{known}); upgrade sqlq")
    return None
