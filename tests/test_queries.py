"""Every named query: it parses, and none scans the jobs table (reserve cost stays flat)."""

from __future__ import annotations

import re

import pytest

from sqlq import Queue, store

# Stats and the tube list are for people and monitors; they read every job once.
MAY_SCAN = {"count_jobs", "list_tubes"}


@pytest.mark.parametrize("name", sorted(store.Q))
def test_query_plan_uses_indexes(q: Queue, name: str) -> None:
    sql = store.Q[name]
    params: dict[str, object] | tuple[None, ...] = {p: None for p in re.findall(r":(\w+)", sql)}
    if "tubes" in params:
        params["tubes"] = '["a", "b"]'  # type: ignore[call-overload]
    if not params:  # positional
        params = (None,) * sql.count("?")
    plan = [row[3] for row in q._db.conn.execute("EXPLAIN QUERY PLAN " + sql, params)]
    # Walking the reserved-jobs index is bounded by the reservations held, not the queue.
    scans = [step for step in plan if re.match(r"SCAN (sqlq_jobs|j|r)\b", step)
             and "INDEX sqlq_jobs_reserved" not in step]
    if name not in MAY_SCAN:
        assert not scans, f"{name} scans the jobs table: {plan}"


def test_every_query_is_used_by_store() -> None:
    with open(store.__file__) as f:
        source = f.read()
    unused = [name for name in store.Q
              if f'"{name}"' not in source and f"_{name.upper()}" not in source
              and not re.fullmatch(r"peek_\w+_id|list_\w+_jobs", name)]  # named by state
    assert not unused, f"queries.sql blocks nobody runs: {unused}"
