"""Durable steps and cursors of a job (sqlq/steps.py), and its snooze.

Every write here is made under the job's live lease, checked first in the same
transaction (``step_lease``; on PostgreSQL it also locks the job's row to the commit),
so a worker whose lease was lost records nothing: it gets JobLost (JobCancelled), and
the job's next holder runs the step again.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ...errors import JobTooBig
from ...steps import CURSOR, STEP
from ..sql import one

if TYPE_CHECKING:
    from ..conn import Conn
    from .jobs import JobStore


class StepStore:
    """Steps and cursors; ``jobs`` explains a lost lease and releases a snoozed job."""

    def __init__(self, Q: dict[str, str], jobs: JobStore[Any]) -> None:
        self.Q = Q
        self.jobs = jobs

    def _lease(self, conn: Conn, now: int, job_id: int, lease: int) -> int:
        """The job's count of rows while ``lease`` is live; JobLost (JobCancelled) if not."""
        row = one(conn, self.Q["step_lease"], {"id": job_id, "now": now, "lease": lease})
        if row is None:
            raise self.jobs.lease_failure(conn, job_id, lease)
        return int(row[0])

    def _find(self, conn: Conn, job_id: int, kind: int, name: str) -> tuple[str, int] | None:
        row = one(conn, self.Q["find_step"], {"id": job_id, "kind": kind, "name": name})
        return None if row is None else (_text(row[0]), int(row[1]))

    def _insert(self, conn: Conn, now: int, job_id: int, kind: int, name: str, value: str,
                count: int, most: int) -> int:
        _room(job_id, name, count, most)
        params = {"id": job_id, "kind": kind, "name": name, "value": value, "now": now}
        conn.execute(self.Q["insert_step"], params)
        conn.execute(self.Q["count_step"], {"id": job_id})
        return now

    def record(self, conn: Conn, now: int, job_id: int, lease: int, kind: int, name: str,
               value: str, most: int) -> tuple[str, int]:
        """Record a step's value (once: one already there is kept and returned) or save a
        cursor's (replaced); (the value kept, when, ms). JobTooBig past ``most`` rows."""
        count = self._lease(conn, now, job_id, lease)
        if kind == CURSOR:
            row = one(conn, self.Q["save_cursor"], {"id": job_id, "name": name,
                                                   "value": value, "now": now})
            if row is not None:
                return value, int(row[0])
        else:
            found = self._find(conn, job_id, kind, name)
            if found is not None:
                return found
        return value, self._insert(conn, now, job_id, kind, name, value, count, most)

    def run_step(self, conn: Conn, now: int, job_id: int, lease: int, name: str,
                 work: Callable[[], str], most: int) -> tuple[str, int, bool]:
        """A step whose work writes through ``conn``, in this transaction: the lease
        checked (and, on PostgreSQL, the job's row locked) first, then ``work()`` (the
        step's function; its value as JSON) unless the step is recorded already, then
        its record. (value, when, whether ``work`` ran)."""
        count = self._lease(conn, now, job_id, lease)
        found = self._find(conn, job_id, STEP, name)
        if found is not None:
            return found[0], found[1], False
        _room(job_id, name, count, most)  # before the work: past the cap, nothing runs
        value = work()
        return value, self._insert(conn, now, job_id, STEP, name, value, count, most), True

    def load(self, conn: Conn, job_id: int) -> list[tuple[int, str, str, int]]:
        """(kind, name, value as JSON, when) of each of a job's rows: steps in the order
        they finished, then cursors."""
        return [(int(r[0]), _text(r[1]), _text(r[2]), int(r[3]))
                for r in conn.execute(self.Q["job_steps"], {"id": job_id})]

    def snooze(self, conn: Conn, now: int, job_id: int, lease: int, delay_ms: int) -> None:
        """Give a reserved job back, due in ``delay_ms``, as if this run had not been
        claimed: a release (``JobStore.release``: its due time, its wake-up) whose claim
        and release are not counted, so the attempt number and the retry budget stay."""
        self.jobs.release(conn, now, job_id, lease, None, delay_ms)
        conn.execute(self.Q["unclaim_counts"], {"id": job_id})


def _text(value: object) -> str:
    """A text column as str: an application's psycopg connection to a SQL_ASCII database
    reads text as bytes (sqlq's own connections ask for UTF8)."""
    return value.decode() if isinstance(value, bytes) else str(value)


def _room(job_id: int, name: str, count: int, most: int) -> None:
    """JobTooBig when a job's ``count`` rows are already the ``most`` it may keep."""
    if count >= most:
        raise JobTooBig(f"job {job_id} has {count} steps and cursors, the most a job keeps; "
                        f"{name!r} is not recorded")

