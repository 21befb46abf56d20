"""Control of running jobs (sqlq/control.py): cancellation and progress.

Which lease a job was cancelled under is read by ``JobStore.cancelled_lease``: the
failure path of every lease-checked verb needs it, and jobs need no control store.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ...errors import JobNotFound
from ..sql import one

if TYPE_CHECKING:
    from ..conn import Conn
    from .jobs import JobStore


class ControlStore:
    """Cancel and progress; ``jobs`` deletes a cancelled job and explains lost leases."""

    def __init__(self, Q: dict[str, str], jobs: JobStore[Any]) -> None:
        self.Q = Q
        self.jobs = jobs

    def cancel(self, conn: Conn, now: int, job_id: int, keep_ms: int,
               actor: str | None = None) -> str:
        """Delete a live job, as ``JobStore.delete`` by id (its record says cancelled, by
        ``actor``); a reserved one's (id, lease) is remembered until ``keep_ms`` after its
        lease's end, for its holder's next verb (JobCancelled). Older cancellations are
        purged on the way. Its tube."""
        # The purge first, holding no job's lock (PostgreSQL's cancel_state locks the job:
        # two cancels each holding a job and waiting on the other's purge could deadlock).
        conn.execute(self.Q["purge_cancelled"], {"now": now})
        row = one(conn, self.Q["cancel_state"], {"id": job_id, "now": now})
        if row is None:
            raise JobNotFound(f"job {job_id} not found")
        if row[1] is not None:
            conn.execute(self.Q["remember_cancelled"],
                         {"id": job_id, "lease": row[1], "until": row[2] + keep_ms})
        return self.jobs.delete(conn, now, job_id, None, actor, "cancelled")

    def cancelled_among(self, conn: Conn, ids: Sequence[int]) -> list[tuple[int, int]]:
        """(id, lease) of those of ``ids`` that were cancelled while reserved (recently)."""
        return [(int(r[0]), int(r[1])) for r in conn.execute(
            self.Q["cancelled_among"], {"ids": self.jobs.ids_param(ids)})]

    def set_progress(self, conn: Conn, now: int, job_id: int, lease: int | None,
                     progress: str, message: str | None) -> None:
        """Store a reserved job's progress (JSON text) and message, under its lease."""
        params = {"id": job_id, "lease": lease, "now": now, "progress": progress,
                  "message": message}
        if one(conn, self.Q["set_progress"], params) is None:
            raise self.jobs.lease_failure(conn, job_id, lease)

    def job_progress(self, conn: Conn, job_id: int) -> tuple[str | None, str | None] | None:
        """(progress as JSON text, message) of a job, or None if there is no such job."""
        row = one(conn, self.Q["job_progress"], {"id": job_id})
        return None if row is None else (row[0], row[1])
