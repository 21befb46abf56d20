"""Moving a database (``sqlq copy``, sqlq/copy.py): every row, kind by kind, read in one
snapshot and written as it was read, ids and counters included."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Generic

from ..conn import ConnT

#: What ``sqlq copy`` moves, table by table: the columns of each export_/import_ query.
COPIED: dict[str, tuple[str, ...]] = {
    "job": ("id", "tube", "priority", "state", "delay_until", "ttr", "body", "created_at",
            "reserves", "timeouts", "releases", "buries", "kicks", "bury_reason", "unique_key",
            "delay", "waiting_on", "dependents", "trace", "steps", "grp", "turn"),
    "edge": ("parent", "child"),
    "tube": ("name", "paused_until", "pause_ms", "concurrency", "rate", "rate_ms", "grouped",
             "group_concurrency", "group_rate", "group_rate_ms"),
    "group": ("tube", "grp", "turn"),
    "result": ("job_id", "result", "expires_at"),
    "subscription": ("topic", "tube"),
    "periodic": ("name", "last_slot", "enqueued_at"),
    "step": ("job_id", "kind", "name", "value", "done_at"),
}

#: The kinds that may hold millions of rows, read a page at a time in key order, with
#: the parameters that name the last row's key (its first columns): a copy holds one
#: page, never a whole table. The others (tubes, subscriptions, periodic slots) are a
#: few rows, read at once.
PAGED: dict[str, tuple[str, ...]] = {"job": ("after",), "edge": ("parent", "child"),
                                     "result": ("after",), "step": ("job_id", "kind", "name")}


class CopyStore(Generic[ConnT]):
    """Export and import of every kind of row (COPIED)."""

    #: The kinds of row, in the order an import needs them, with their columns.
    COPIED = COPIED

    def __init__(self, Q: dict[str, str]) -> None:
        self.Q = Q

    def begin_snapshot(self, conn: ConnT) -> None:  # noqa: B027 - most dialects need nothing
        """Make the reads of the transaction just begun on conn see one snapshot (SQLite's
        transactions always do)."""

    def export_rows(self, conn: ConnT, kind: str, after: Sequence[Any] | None = None,
                    limit: int = 500) -> list[tuple[Any, ...]]:
        """Rows of one kind of COPIED: of a PAGED kind, up to ``limit`` past the row whose
        key is ``after`` (None: from the first); of the others, all."""
        keys = PAGED.get(kind)
        if keys is None:
            return list(conn.execute(self.Q[f"export_{kind}"]))
        params: dict[str, Any] = dict(zip(keys, after or (0,) * len(keys), strict=True))
        params["limit"] = limit
        return list(conn.execute(self.Q[f"export_{kind}"], params))

    def import_rows(self, conn: ConnT, kind: str, rows: Sequence[Sequence[Any]]) -> None:
        """Insert rows of one kind of COPIED, as export_rows gave them."""
        columns = COPIED[kind]
        conn.cursor().executemany(self.Q[f"import_{kind}"],
                                  [dict(zip(columns, row, strict=True)) for row in rows])

    def set_total_jobs(self, conn: ConnT, total: int) -> None:
        """Make the next id follow ``total`` (ids are never issued twice)."""
        conn.execute(self.Q["set_total_jobs"], {"total": total})
