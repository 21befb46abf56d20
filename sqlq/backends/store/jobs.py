"""Jobs: their inserts, the verbs on one job (lease-checked or by id) and its reads by id.

A delete releases the job's children in the same transaction (``release_children``,
here because only a delete calls it); every lease-checked verb that changed nothing
says why through :meth:`JobStore.lease_failure`, the one reader of the cancelled
leases (so that no sibling noun is needed to explain a failure), and :func:`lease_lost`
words it (PostgreSQL's delete-and-claim, one statement whose error may abort its
transaction, reads them itself: migration 0007).
"""

from __future__ import annotations

import abc
import contextlib
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Generic

from ...errors import JobCancelled, JobLost, JobNotFound
from ...model import JobRow, cap_reason
from ..conn import ConnT
from ..sql import one

if TYPE_CHECKING:
    from ...putting import Put


def lease_lost(job_id: int, cancelled: bool) -> JobLost:
    """What a verb under a lease that no longer holds raises: JobCancelled if the job
    was cancelled under it."""
    if cancelled:
        return JobCancelled(f"job {job_id} was cancelled", job_ids=(job_id,))
    return JobLost(f"job {job_id}: lease lost (TTR expired or reserved again)",
                   job_ids=(job_id,))


class JobStore(abc.ABC, Generic[ConnT]):
    """A dialect's verbs on jobs. ``Q`` maps each query name to its statement."""

    #: Whether insert_puts is one statement (group commit may then run it alone, without
    #: BEGIN and COMMIT around it).
    ONE_STATEMENT_PUTS = False
    #: Whether a delete's statement (delete_job, delete_leased_job, delete_leased_jobs)
    #: writes the records and removes the jobs both (PostgreSQL's data-modifying CTE), so
    #: that the delete verbs may run as one autocommit statement; else it writes the
    #: records and :meth:`ended` removes the jobs, in the same transaction.
    ONE_STATEMENT_DELETE = True

    def __init__(self, Q: dict[str, str]) -> None:
        self.Q = Q

    # -- dialect-specific --------------------------------------------------------------------

    @abc.abstractmethod
    def ids_param(self, ids: Sequence[int]) -> Any:
        """A list of job ids as one parameter (hold_parents, insert_edges)."""

    @abc.abstractmethod
    def insert_waiting_job(self, conn: ConnT, now: int, tube: str, priority: int,
                           delay_ms: int, ttr_ms: int, body: bytes, unique_key: str | None,
                           waiting_on: int) -> int | None:
        """Insert one job waiting for ``waiting_on`` parents; None if its unique key was
        taken meanwhile (the caller then reads the live job's id)."""

    @abc.abstractmethod
    def insert_job(self, conn: ConnT, now: int, tube: str, priority: int, delay_ms: int,
                   ttr_ms: int, body: bytes, unique_key: str | None) -> int:
        """Insert one job; with a unique_key already live in the tube, return that
        job's id and insert nothing."""

    @abc.abstractmethod
    def insert_jobs(self, conn: ConnT, now: int, tube: str, priority: int, delay_ms: int,
                    ttr_ms: int, bodies: Sequence[bytes]) -> list[int]:
        """Insert many jobs; return their ids, in order."""

    def insert_puts(self, conn: ConnT, now: int,
                    puts: Sequence[tuple[str, int, int, int, bytes]]) -> list[int]:
        """Insert the jobs of several puts, each (tube, priority, delay_ms, ttr_ms, body)
        with its own options (threads' puts sharing one commit); their ids, in order."""
        return [self.insert_job(conn, now, *put, None) for put in puts]

    @abc.abstractmethod
    def total_jobs(self, conn: ConnT) -> int:
        """How many ids were ever issued (beanstalkd's total-jobs of the file)."""

    @abc.abstractmethod
    def savepoint(self, conn: ConnT) -> contextlib.AbstractContextManager[object]:
        """A savepoint on conn: inside a transaction, nested in it; else a transaction
        of its own, committed at the end of the block (rolled back on an exception)."""

    def unique_job_id(self, conn: ConnT, tube: str, unique_key: str) -> int | None:
        """The live job holding ``unique_key`` in ``tube``, if any."""
        row = one(conn, self.Q["find_unique_job"], {"tube": tube, "unique_key": unique_key})
        return None if row is None else int(row[0])

    # -- a put that replaces (on_conflict="replace"; Store.replace runs the three) -----------

    def replace_job(self, conn: ConnT, now: int, tube: str, put: Put, body: bytes, *,
                    insert: bool) -> int | None:
        """Give the ready, delayed or waiting job holding ``put.unique_key`` in ``tube``
        the put's body and options (its delay from ``now``), or with ``insert`` put the
        job if no job holds the key; its id. None: a reserved or buried job holds it."""
        params = {"tube": tube, "unique_key": put.unique_key, "body": body,
                  "priority": put.priority, "ttr": put.ttr_ms, "delay": put.delay_ms,
                  "delay_until": now + put.delay_ms if put.delay_ms else None, "now": now}
        row = one(conn, self.Q["upsert_unique_job"] if insert else self.Q["replace_job"], params)
        return None if row is None else int(row[0])

    def pass_key(self, conn: ConnT, tube: str, unique_key: str) -> int | None:
        """Take ``unique_key`` from the reserved or buried job holding it in ``tube`` (its
        only change, for a replace's follow-up to hold); that job's id, or None."""
        row = one(conn, self.Q["pass_unique_key"], {"tube": tube, "unique_key": unique_key})
        return None if row is None else int(row[0])

    # -- lease-checked and by-id verbs -------------------------------------------------------

    def lease_failure(self, conn: ConnT, job_id: int, lease: int | None) -> Exception:
        """Why a verb on a reserved job changed nothing.

        With a lease the caller held a reservation, and whatever became of the job
        since (expired, reserved again, or deleted by its next holder) that
        reservation is lost: JobLost. Without one (an administrator's verb by id),
        the job is missing or not reserved: JobNotFound. A lease lost because the job
        was cancelled (``ControlStore.cancel``) raises JobCancelled, a JobLost: only this
        failure path reads sqlq_cancelled.
        """
        if lease is not None:
            return lease_lost(job_id, cancelled=self.cancelled_lease(conn, job_id) == lease)
        if one(conn, self.Q["lease_state"], {"id": job_id}) is None:
            return JobNotFound(f"job {job_id} not found")
        return JobNotFound(f"job {job_id} is not reserved")

    def cancelled_lease(self, conn: ConnT, job_id: int) -> int | None:
        """The lease job_id was cancelled under (recently), or None."""
        row = one(conn, self.Q["cancelled_lease"], {"id": job_id})
        return None if row is None else int(row[0])

    def delete(self, conn: ConnT, now: int, job_id: int, lease: int | None,
               actor: str | None = None, outcome: str = "deleted") -> str:
        """Delete the job (any state without a lease, else only under that live lease);
        return its tube ('' for a job without edges deleted under its lease on SQLite: no
        caller of the worker's ack reads it, and returning it costs). Its children, if
        any, are released in the same transaction, and its record (``sqlq_finished``)
        written: ``done`` under a lease, else ``outcome`` by ``actor`` (who asked)."""
        if lease is None:
            row = one(conn, self.Q["delete_job"], {"id": job_id, "now": now,
                                                   "outcome": outcome, "actor": actor})
            if row is not None:
                self.ended(conn, [job_id])
        else:  # a worker's, on every job
            row = self.delete_leased(conn, now, job_id, lease)
        if row is not None:
            return str(row[0])
        # Nothing deleted: no such job, a lost lease, or a job with dependency edges, which
        # those statements leave to delete_linked (this read only when they found nothing).
        links = one(conn, self.Q["job_links"], {"id": job_id})
        if links is not None and (links[0] or links[1]):
            tube = self.delete_linked(conn, now, job_id, lease, actor, outcome)
            if tube is not None:
                return tube
        if lease is None:
            raise JobNotFound(f"job {job_id} not found")
        raise self.lease_failure(conn, job_id, lease)

    def ended(self, conn: ConnT, job_ids: Sequence[int]) -> None:
        """Remove the jobs whose records the delete's statement just wrote, where that
        statement does not (``ONE_STATEMENT_DELETE`` false)."""
        return None

    @abc.abstractmethod
    def delete_leased(self, conn: ConnT, now: int, job_id: int, lease: int
                      ) -> Sequence[Any] | None:
        """The worker's delete under a live lease and the job's record: a row whose
        first column is the tube, or None (the lease lost, or a job with dependents)."""

    def finished(self, conn: ConnT, now: int, job_id: int, tube: str, outcome: str,
                 actor: str | None, row: Sequence[Any]) -> None:
        """Write the record of a job delete_linked_job just took, from what it returned
        (state, owner, reservation start, reserves, created_at, unique_key, body's head,
        group, steps and cursors as JSON):
        nothing for a backend whose statement writes it itself."""
        return None

    def delete_linked(self, conn: ConnT, now: int, job_id: int, lease: int | None,
                      actor: str | None = None, outcome: str = "deleted") -> str | None:
        """Delete a job that has dependents or parents (by id, or under its live lease),
        release its children (each one parent less; ready, or delayed from now, at zero)
        and drop its edges, in one savepoint: the caller's transaction, or its own when
        the verb runs as a lone statement. Its tube, or None if nothing matched."""
        if lease is not None:
            outcome = "done"
        with self.savepoint(conn):
            row = one(conn, self.Q["delete_linked_job"], {
                "id": job_id, "lease": lease, "now": now, "outcome": outcome,
                "actor": actor})
            if row is None:
                return None
            self.finished(conn, now, job_id, str(row[0]), outcome, actor, row[3:])
            dependents, waiting_on = row[1], row[2]
            if dependents:
                self.release_children(conn, now, job_id)
            if waiting_on:
                conn.execute(self.Q["forget_child_edges"], {"id": job_id})
            return str(row[0])

    def release_children(self, conn: ConnT, now: int, parent: int) -> None:
        """The children of ``parent``, gone in this transaction: each one parent less; at
        zero, ready, or delayed by its delay from now. The parent's edges go too."""
        conn.execute(self.Q["release_children"], {"id": parent, "now": now})

    def release(self, conn: ConnT, now: int, job_id: int, lease: int | None,
                priority: int | None, delay_ms: int) -> None:
        """Put a reserved job back: ready, or delayed by delay_ms."""
        params = {"id": job_id, "lease": lease, "now": now, "priority": priority,
                  "delay": delay_ms, "delay_until": now + delay_ms if delay_ms else None}
        if one(conn, self.Q["release_job"], params) is None:
            raise self.lease_failure(conn, job_id, lease)

    def bury(self, conn: ConnT, now: int, job_id: int, lease: int | None,
             priority: int | None, reason: str | None) -> None:
        """Park a reserved job until kicked, keeping reason: its first MESSAGE_LIMIT
        characters or so (model.cap), whoever gives it (a caller, a worker's failure)."""
        params = {"id": job_id, "lease": lease, "now": now, "priority": priority,
                  "reason": cap_reason(reason)}
        if one(conn, self.Q["bury_job"], params) is None:
            raise self.lease_failure(conn, job_id, lease)

    def touch(self, conn: ConnT, now: int, job_id: int, lease: int | None) -> int:
        """Restart a reservation's TTR; return its new deadline (ms)."""
        row = one(conn, self.Q["touch_job"], {"id": job_id, "lease": lease, "now": now})
        if row is None:
            raise self.lease_failure(conn, job_id, lease)
        return int(row[0])

    def kick(self, conn: ConnT, now: int, tube: str, bound: int) -> int:
        """Kick up to bound buried jobs in the tube; if there are none, delayed ones."""
        params = {"tube": tube, "bound": bound, "now": now}
        kicked = conn.execute(self.Q["kick_buried"], params).fetchall()
        if not kicked:
            kicked = conn.execute(self.Q["kick_delayed"], params).fetchall()
        return len(kicked)

    def kick_job(self, conn: ConnT, now: int, job_id: int) -> None:
        """Move one buried or delayed job to ready."""
        if one(conn, self.Q["kick_job"], {"id": job_id, "now": now}) is None:
            raise JobNotFound(f"job {job_id} not found or not buried or delayed")

    def postpone(self, conn: ConnT, now: int, job_id: int, delay_ms: int) -> None:
        """Make a ready or delayed job wait ``delay_ms`` from now (0: ready now)."""
        params = {"id": job_id, "delay": delay_ms,
                  "delay_until": now + delay_ms if delay_ms else None}
        if one(conn, self.Q["postpone_job"], params) is None:
            raise JobNotFound(f"job {job_id} not found or not ready or delayed")

    # -- reads by id -------------------------------------------------------------------------

    def select_job(self, conn: ConnT, now: int, job_id: int) -> JobRow | None:
        """The job as an observer sees it now, or None."""
        row = one(conn, self.Q["select_job"], {"id": job_id, "now": now})
        return JobRow(*row) if row else None

    def peek_id(self, conn: ConnT, now: int, which: str, tube: str) -> int | None:
        """The id peek_ready/_delayed/_buried (which) would show, or None."""
        row = one(conn, self.Q[f"peek_{which}_id"], {"tube": tube, "now": now})
        return int(row[0]) if row else None

    def change_token(self, conn: ConnT) -> tuple[Any, ...]:
        """A value that differs whenever what this connection reads may have changed
        (another connection committed, or this one wrote) since it was last read."""
        return tuple(one(conn, self.Q["change_token"]))

    def set_trace(self, conn: ConnT, ids: Sequence[int], trace: str) -> None:
        """Store a traced put's trace context on the jobs it just inserted (core/tracing.py)."""
        conn.execute(self.Q["set_job_trace"], {"ids": self.ids_param(ids), "trace": trace})
