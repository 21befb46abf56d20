"""The read-only views for people: the dashboard's, /metrics' and the CLI's reads of
tubes and jobs (observe.py), none of them on a worker's path."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..sql import one

if TYPE_CHECKING:
    from ..conn import Conn

#: The states a job list can show, each in its own index's order.
LIST_STATES = ("ready", "delayed", "reserved", "buried", "waiting")


class ViewStore:
    """Reads of tubes and jobs for operators."""

    def __init__(self, Q: dict[str, str]) -> None:
        self.Q = Q

    def tube_names(self, conn: Conn, now: int) -> list[str]:
        """Tubes with jobs, paused or subscribed, without reading every job (list_tubes
        does): a hop from tube to tube in each state's index."""
        return sorted(r[0] for r in conn.execute(self.Q["tube_names"], {"now": now}))

    def known_tubes(self, conn: Conn) -> list[str]:
        """Tubes with counters, a pause (past or present) or histograms: known, if empty."""
        return sorted(r[0] for r in conn.execute(self.Q["known_tubes"]))

    def list_tubes(self, conn: Conn, now: int) -> list[str]:
        """Tubes that hold jobs, are paused, or are subscribed to a topic."""
        return sorted(r[0] for r in conn.execute(self.Q["list_tubes"], {"now": now}))

    def tube_counts(self, conn: Conn, now: int, tube: str) -> tuple[Any, ...]:
        """(ready, urgent, reserved, delayed, buried, oldest ready created_at, earliest due
        delay_until, paused_until) of one tube as of now."""
        row = one(conn, self.Q["tube_counts"], {"now": now, "tube": tube})
        oldest = None
        if row[5] is not None:
            found = one(conn, self.Q["job_created_at"], {"id": row[5]})
            oldest = found[0] if found else None
        return (*(int(n) for n in row[:5]), oldest, *row[6:])

    def tube_totals(self, conn: Conn, tube: str) -> tuple[int, int]:
        """(puts, pauses) of the tube since the database was created."""
        row = one(conn, self.Q["tube_totals"], {"tube": tube})
        return int(row[0]), int(row[1])

    def count_jobs(self, conn: Conn, now: int, tube: str | None) -> dict[str, list[int]]:
        """tube -> [ready, urgent, reserved, delayed, buried, waiting] as of now."""
        return {r[0]: [int(x or 0) for x in r[1:]]
                for r in conn.execute(self.Q["count_jobs"], {"now": now, "tube": tube})}

    def count_everything(self, conn: Conn) -> int:
        """Rows of every kind plus ids ever issued: 0 only for a database never used."""
        return int(one(conn, self.Q["count_everything"])[0])

    def list_jobs(self, conn: Conn, tube: str, state: str, key: int, after: int,
                  limit: int) -> list[tuple[Any, ...]]:
        """A page of jobs in one state, after the row (key, after) in that state's order."""
        if state not in LIST_STATES:
            raise ValueError(f"state must be one of {', '.join(LIST_STATES)}, not {state!r}")
        params = {"tube": tube, "key": key, "after": after, "limit": limit}
        return [tuple(r) for r in conn.execute(self.Q[f"list_{state}_jobs"], params)]

    def search_jobs(self, conn: Conn, tube: str, text: str, min_id: int,
                    limit: int) -> list[tuple[Any, ...]]:
        """Jobs of tube above min_id whose id, unique key or body contains text."""
        params = {"tube": tube, "text": text, "bytes": text.encode(), "min_id": min_id,
                  "limit": limit}
        return [tuple(r) for r in conn.execute(self.Q["search_jobs"], params)]

    def job_trace(self, conn: Conn, job_id: int) -> str | None:
        """The trace context a traced put stored with the job; None if none (or no job)."""
        row = one(conn, self.Q["job_trace"], {"id": job_id})
        return None if row is None else row[0]

    def event_counters(self, conn: Conn) -> dict[str, tuple[int, int, int]]:
        """tube -> (buries, kicks, timeouts) since the database was created."""
        return {r[0]: (r[1], r[2], r[3]) for r in conn.execute(self.Q["event_counters"])}
