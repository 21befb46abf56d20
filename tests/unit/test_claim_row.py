"""Every claim statement returns ClaimRow's columns, in ClaimRow's order.

The stores build a :class:`sqlq.model.ClaimRow` from a claim's row without a length
check (SQLite's hottest path: ``tuple.__new__``), and :meth:`Job.from_claim` reads it by
name: a column added, dropped or moved in one ``queries.sql`` fails here, not as a job
with its lease in its reserved_until.
"""

from __future__ import annotations

import re

import pytest

from sqlq.backends.postgres import floors
from sqlq.backends.postgres.store import Q as POSTGRES
from sqlq.backends.sqlite.store import Q as SQLITE
from sqlq.model import ClaimRow

CLAIMS = [("sqlite", SQLITE, name) for name in
          ("claim_job", "claim_job_in_tube", "claim_job_by_id", "claim_jobs",
           "claim_jobs_in_tube")]
CLAIMS += [("postgres", POSTGRES, name) for name in
           ("claim_job", "claim_job_by_id", "claim_jobs", "delete_and_claim",
            "delete_and_claim_jobs")]


def returned_columns(sql: str) -> list[str]:
    """The column list of a statement's RETURNING, or of its outer SELECT ... FROM."""
    code = "\n".join(line for line in sql.splitlines() if not line.lstrip().startswith("--"))
    match = re.search(r"\bRETURNING\b(.*?);?\s*$", code, re.S)
    if match is None:  # the outer SELECT: the first at the start of a line (after a WITH)
        match = re.search(r"^SELECT\b(.*?)\bFROM\b", code, re.S | re.M)
    assert match is not None, sql
    return [column.strip().rsplit(".", 1)[-1] for column in match.group(1).split(",")]


@pytest.mark.parametrize(("dialect", "queries", "name"), CLAIMS,
                         ids=[f"{d}-{n}" for d, _, n in CLAIMS])
def test_claim_returns_claim_row_columns(dialect: str, queries: dict[str, str],
                                         name: str) -> None:
    columns = returned_columns(queries[name])
    assert columns[:len(ClaimRow._fields)] == list(ClaimRow._fields), (dialect, name)
    extra = columns[len(ClaimRow._fields):]
    if dialect == "postgres" and name != "claim_job_by_id":
        # Then what the claim says of its floors, where floors.py reads it.
        at = {column: i + floors.CLAIM_COLUMNS for i, column in enumerate(extra)}
        assert len(extra) == 5, (name, extra)
        assert at["again"] == floors.AGAIN and at["status"] == floors.STATUS, (name, extra)
        assert at["expired_from"] == floors.EXPIRED_FROM, (name, extra)
        assert extra[floors.XMAX - floors.CLAIM_COLUMNS].startswith("xmax"), (name, extra)
    else:
        assert not extra, (dialect, name)
