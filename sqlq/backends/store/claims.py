"""Claims: reserving the most urgent ready job, the worker's delete-and-claim, and what a
waiting claim reads first (has_ready_job, next_due); an owner's reservations given back.

The claim is where the dialects differ most (how due jobs are folded in, how tube lists
are passed): most verbs here are the dialect's own.
"""

from __future__ import annotations

import abc
import math
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any, Generic

from ...errors import JobNotFound
from ...model import ClaimRow
from ..conn import ConnT
from ..sql import one

if TYPE_CHECKING:
    from .groups import FairClaim, Pick
    from .jobs import JobStore


#: The longest FAIR_PROMOTE_EVERY_MS of any backend.
FAIR_PROMOTE_EVERY_MS = 250


class ClaimStore(abc.ABC, Generic[ConnT]):
    """A dialect's claims; ``jobs`` deletes the job a delete-and-claim acknowledges."""

    #: Whether a waiting claim first reads has_ready_job: where a claim that finds
    #: nothing holds a lock others wait on (SQLite's one writer), idle waiters woken by
    #: unrelated commits must not take it; where it holds none (PostgreSQL's SKIP
    #: LOCKED), the read is only one more round trip before the claim.
    LOOK_BEFORE_CLAIM = True
    #: Whether claim and delete_and_claim are one statement each: a backend may then run
    #: them as their own transaction (one round trip to a server instead of four).
    ONE_STATEMENT_CLAIM = False
    #: Whether claim and claim_many (without a delete) may run outside a transaction
    #: (``Backend.write(single=True)``): each commit they make on their own leaves the
    #: database consistent (SQLite: a promotion of due jobs, then the claim).
    CLAIM_OUTSIDE_TRANSACTION = False

    #: How often (ms) the fast fair claim writes down a grouped tube's due jobs: 0, every
    #: claim (SQLite's DueCache skips it while nothing can be due); PostgreSQL's is a
    #: statement of its own (a due delayed job is then claimed up to this late while the
    #: tube is busy, as an expired reservation in sqlq_claim).
    FAIR_PROMOTE_EVERY_MS = 0

    def __init__(self, Q: dict[str, str], jobs: JobStore[ConnT]) -> None:
        self.Q = Q
        self.jobs = jobs
        self._promoted: dict[str, int] = {}  # grouped tube -> the fast path's last promotion

    @abc.abstractmethod
    def tubes_param(self, tubes: Sequence[str]) -> Any:
        """The :tubes parameter for claim, has_ready_job and next_due (the Queue caches it
        per distinct argument: a worker asks for the same tubes on every call)."""

    @abc.abstractmethod
    def claim(self, conn: ConnT, now: int, tubes: Any, owner: str | None) -> ClaimRow | None:
        """Reserve the most urgent ready job in tubes (due delayed jobs and expired
        reservations count as ready) for owner; its claim row, or None."""

    @abc.abstractmethod
    def claim_many(self, conn: ConnT, now: int, tubes: Any, owner: str | None, n: int
                   ) -> list[ClaimRow]:
        """claim for up to n jobs in one statement, each under a lease of its own; their
        claim rows in claim order (priority, then id)."""

    @abc.abstractmethod
    def claim_capped(self, conn: ConnT, now: int, tubes: Any, owner: str | None
                     ) -> ClaimRow | None:
        """claim, in tubes ``LimitStore.claim_limited`` chose: a tube with limits is not
        skipped (claim_job with capped true)."""

    @abc.abstractmethod
    def delete_many(self, conn: ConnT, now: int, leases: Sequence[tuple[int, int]]
                    ) -> list[tuple[int, int]]:
        """Delete each (id, lease) job under its live lease; return the (id, lease) pairs
        that were lost (the others are deleted all the same: an acknowledgement is never
        dropped). The caller raises JobLost for them once the transaction commits."""

    def promote_fair(self, conn: ConnT, now: int, tubes: Any) -> None:
        """Before a fair claim (groups.py): write down the grouped tubes' due delayed jobs
        and expired reservations as ready, so their turns count."""
        conn.execute(self.Q["promote_grouped"], {"tubes": tubes, "now": now})

    def claim_fair_head(self, conn: ConnT, now: int, tube: str, owner: str | None,
                        checked: bool) -> ClaimRow | None:
        """A grouped tube's first ready job in claim order (no group limits); unless
        ``checked`` (its limits were read), nothing while it is paused or has limits."""
        row = one(conn, self.Q["claim_fair_head"],
                  {"tube": tube, "now": now, "owner": owner, "checked": checked})
        return None if row is None else ClaimRow._make(row)

    def claim_fair(self, conn: ConnT, now: int, fair: FairClaim, pick: Pick,
                   owner: str | None) -> ClaimRow | None:
        """Claim the job a grouped tube's FairClaim picked (None: taken meanwhile, by a
        reserve_job)."""
        row = one(conn, self.Q["claim_ready_job"], {"id": pick[1], "now": now, "owner": owner})
        if row is None:
            return None
        fair.took(pick)
        return ClaimRow._make(row)

    def claim_fair_alone(self, conn: ConnT, now: int, tubes: Any, tube: str,
                         owner: str | None) -> ClaimRow | None:
        """The engine's fast path for one grouped tube seen without limits: its due jobs
        written down (at most every FAIR_PROMOTE_EVERY_MS: a claim that finds nothing
        falls back on claim_limited, which always does), then :meth:`claim_fair_head`
        with the tube's row probed."""
        if now - self._promoted.get(tube, -FAIR_PROMOTE_EVERY_MS) >= self.FAIR_PROMOTE_EVERY_MS:
            self.promote_fair(conn, now, tubes)
            if len(self._promoted) >= 256:
                self._promoted.clear()
            self._promoted[tube] = now
        return self.claim_fair_head(conn, now, tube, owner, False)

    def delete_and_claim(self, conn: ConnT, now: int, job_id: int, lease: int, tubes: Any,
                         owner: str | None) -> ClaimRow | None:
        """Delete a reserved job under its lease (JobLost if the lease is gone: nothing
        is claimed then) and claim the next, atomically: a worker's one commit per job."""
        self.jobs.delete(conn, now, job_id, lease)
        return self.claim(conn, now, tubes, owner)

    def delete_and_claim_many(self, conn: ConnT, now: int, leases: Sequence[tuple[int, int]],
                              tubes: Any, owner: str | None, n: int
                              ) -> tuple[list[tuple[int, int]], list[ClaimRow]]:
        """delete_many, then, if no lease was lost, claim_many: (lost pairs, claim rows).
        With a lost lease nothing is claimed, and the other deletes stand."""
        lost = self.delete_many(conn, now, leases) if leases else []
        if lost:
            return lost, []
        return [], self.claim_many(conn, now, tubes, owner, n)

    def claim_by_id(self, conn: ConnT, now: int, job_id: int, owner: str | None) -> ClaimRow:
        """beanstalkd's reserve-job: any job not reserved under a live lease."""
        row = one(conn, self.Q["claim_job_by_id"], {"id": job_id, "now": now, "owner": owner})
        if row is None:
            raise JobNotFound(f"job {job_id} not found or already reserved")
        return ClaimRow._make(row)

    def has_ready_job(self, conn: ConnT, now: int, tubes: Any) -> bool:
        """Whether a claim would find a job now (a read a waiter makes before writing)."""
        return one(conn, self.Q["has_ready_job"], {"tubes": tubes, "now": now}) is not None

    def next_due(self, conn: ConnT, now: int, tubes: Any) -> int | None:
        """The earliest time (ms) at which a job in these tubes may become ready, or None:
        a delayed job, a reservation's TTR, the end of a pause, a rate's next claim."""
        row = one(conn, self.Q["next_due"], {"tubes": tubes, "now": now})
        times = [t for t in row if t is not None]
        # A rate's next claim is a float (ms): rounded up, never early.
        return math.ceil(min(times)) if times else None

    # -- dead owners -------------------------------------------------------------------------

    def reserving_owners(self, conn: ConnT, now: int, me: str) -> list[str]:
        """The other processes holding live reservations."""
        return [r[0] for r in conn.execute(self.Q["reserving_owners"], {"now": now, "owner": me})]

    def release_owner(self, conn: ConnT, owner: str) -> int:
        """Give back every reservation of owner (it died or closed); how many."""
        return len(conn.execute(self.Q["release_owner"], {"owner": owner}).fetchall())

    def release_owners(self, conn: ConnT, owners: Iterable[str]) -> int:
        """:meth:`release_owner` for each of owners, in one transaction; how many."""
        return sum(self.release_owner(conn, owner) for owner in owners)
