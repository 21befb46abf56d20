"""The two ``queries.sql`` files agree wherever the dialects do.

Many queries are the same statement in SQLite and PostgreSQL but for the parameter
style. Both files are normalised (comments dropped, whitespace collapsed,
``%(name)s``/``%s`` written ``:name``/``?``, SQLite's ``?N`` written ``?`` and its
``(SELECT :x)`` planner guard written ``:x``, see the header of sqlite/queries.sql) and
**every query that has the same name in both must then be the same text, unless one of
its two blocks says why not on a line ``-- dialect: <reason>``**.

Why this rule and not a list of shared names here, or a ``-- shared`` marker: both of
those check only what someone remembered to declare, so a query added to both files
later is unchecked by default. Here the default is "checked"; an exemption sits next to
the SQL it excuses, with its reason, where a reviewer of either change sees it. A
marker on a query that does agree (or that only one file has) fails too, so
exemptions do not outlive their reason.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from sqlq.backends import postgres, sqlite
from sqlq.backends.sql import load_queries

SQLITE = load_queries(Path(sqlite.__file__).with_name("queries.sql"), comments=True)
POSTGRES = load_queries(Path(postgres.__file__).with_name("queries.sql"), comments=True)
SHARED = sorted(set(SQLITE) & set(POSTGRES))
MARKER = re.compile(r"^--\s*dialect:\s*(.*)$", re.MULTILINE)


def normalise(sql: str, dialect: str) -> str:
    """The statement without comments or layout, in one parameter style."""
    code = "\n".join(line for line in sql.splitlines() if not line.lstrip().startswith("--"))
    if dialect == "postgres":
        code = re.sub(r"%\((\w+)\)s", r":\1", code)
        code = code.replace("%s", "?")
    else:
        code = re.sub(r"\?\d+", "?", code)
        code = re.sub(r"\(SELECT (:\w+)\)", r"\1", code)
    return " ".join(code.split()).rstrip(";").rstrip()


def dialect_reason(name: str) -> str | None:
    """The reason a query differs, from either file's block; None if neither gives one."""
    for queries in (SQLITE, POSTGRES):
        match = MARKER.search(queries.get(name, ""))
        if match:
            return match.group(1).strip()
    return None


def agree(name: str) -> bool:
    return normalise(SQLITE[name], "sqlite") == normalise(POSTGRES[name], "postgres")


@pytest.mark.parametrize("name", SHARED)
def test_shared_query_agrees_or_says_why(name: str) -> None:
    reason = dialect_reason(name)
    if reason is None:
        assert agree(name), (
            f"{name} differs between sqlite/queries.sql and postgres/queries.sql: make them "
            "the same statement, or add '-- dialect: <why>' to its description\n"
            f"  sqlite:   {normalise(SQLITE[name], 'sqlite')}\n"
            f"  postgres: {normalise(POSTGRES[name], 'postgres')}")
    else:
        assert reason, f"{name}: '-- dialect:' needs a reason"
        assert not agree(name), f"{name} is the same in both dialects: drop '-- dialect:'"


def test_markers_only_on_shared_names() -> None:
    for queries in (SQLITE, POSTGRES):
        for name, sql in queries.items():
            if MARKER.search(sql):
                assert name in SHARED, f"{name}: '-- dialect:' on a query only one file has"


def test_a_one_character_drift_is_caught() -> None:
    """The check itself: most shared queries are checked, and one changed character in
    one file makes a checked query differ."""
    checked = [name for name in SHARED if dialect_reason(name) is None]
    assert len(checked) >= len(SHARED) // 3, checked
    for name in checked:
        sql = POSTGRES[name]
        at = max(sql.rfind("sqlq_"), 0) + len("sqlq")  # one character of a table name
        changed = sql[:at] + ("X" if sql[at] != "X" else "Y") + sql[at + 1:]
        assert normalise(SQLITE[name], "sqlite") != normalise(changed, "postgres"), name
