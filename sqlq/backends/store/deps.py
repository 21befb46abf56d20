"""Dependencies: jobs put to wait for others (``after=``), and the edges read back.

A parent's delete releases its children (``JobStore.release_children``): that half
lives with the jobs, so that jobs need no dependency store and this one needs jobs.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ...errors import JobNotFound
from ..sql import one

if TYPE_CHECKING:
    from ..conn import Conn
    from .jobs import JobStore


class DependencyStore:
    """A dialect's verbs on dependency edges; ``jobs`` inserts the jobs they link."""

    def __init__(self, Q: dict[str, str], jobs: JobStore[Any]) -> None:
        self.Q = Q
        self.jobs = jobs

    def insert_after(self, conn: Conn, now: int, tube: str, priority: int, delay_ms: int,
                     ttr_ms: int, bodies: Sequence[bytes], unique_key: str | None,
                     parents: Sequence[int]) -> list[int]:
        """Insert jobs that wait for ``parents`` (each child waits for every parent), in
        the caller's transaction; their ids, in order.

        A parent already gone counts as finished: with none left, the jobs are put as
        without ``after`` (ready, or delayed by ``delay_ms``). An id never issued raises
        JobNotFound before anything is written. With ``unique_key`` (one body), a live
        job holding the key is returned as it is: its parents are not changed.
        """
        jobs = self.jobs
        highest = max(parents)
        if highest > jobs.total_jobs(conn):
            raise JobNotFound(f"job {highest} not found (after=)")
        if unique_key is not None:
            held = jobs.unique_job_id(conn, tube, unique_key)
            if held is not None:
                return [held]
        live = [int(r[0]) for r in conn.execute(
            self.Q["hold_parents"], {"parents": jobs.ids_param(parents), "n": len(bodies)})]
        if not live:
            if len(bodies) == 1:
                return [jobs.insert_job(conn, now, tube, priority, delay_ms, ttr_ms, bodies[0],
                                        unique_key)]
            return jobs.insert_jobs(conn, now, tube, priority, delay_ms, ttr_ms, bodies)
        ids = []
        for body in bodies:
            job_id = jobs.insert_waiting_job(conn, now, tube, priority, delay_ms, ttr_ms, body,
                                             unique_key, len(live))
            if job_id is None:  # the key's live job, put by a racing producer
                held = jobs.unique_job_id(conn, tube, unique_key or "")
                if held is None:
                    raise JobNotFound(f"unique key {unique_key!r}: its job just went")
                return [held]
            ids.append(job_id)
        conn.execute(self.Q["insert_edges"], {"parents": jobs.ids_param(live),
                                              "children": jobs.ids_param(ids)})
        return ids

    def links(self, conn: Conn, job_id: int) -> tuple[list[int], list[int]] | None:
        """(parents the job still waits for, jobs waiting for it), or None if no such job
        is live. The edges are read only for a job whose counters say it has some."""
        row = one(conn, self.Q["job_links"], {"id": job_id})
        if row is None:
            return None
        dependents, waiting_on = row
        params = {"id": job_id}
        parents = ([int(r[0]) for r in conn.execute(self.Q["job_parents"], params)]
                   if waiting_on else [])
        children = ([int(r[0]) for r in conn.execute(self.Q["job_children"], params)]
                    if dependents else [])
        return parents, children

    def waiting_on(self, conn: Conn, job_id: int) -> int:
        """How many parents the job still waits for (0 for no such job)."""
        row = one(conn, self.Q["job_links"], {"id": job_id})
        return 0 if row is None else int(row[1])

    def count_waiting(self, conn: Conn, tube: str | None) -> dict[str, int]:
        """tube -> its waiting jobs (every tube's, or only ``tube``'s), from the edges."""
        return {r[0]: int(r[1])
                for r in conn.execute(self.Q["count_waiting"], {"tube": tube})}
