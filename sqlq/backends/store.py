"""The verbs every backend runs on its own connection: the Queue's whole use of SQL.

A backend's ``queries.sql`` holds one named statement per verb, in its dialect;
:class:`Store` runs them. Most take their parameters by name, in a dict (``:name``
in SQLite, ``%(name)s`` in PostgreSQL). The hottest take a positional tuple instead,
which binds faster (``?``/``?1`` in SQLite, ``%s`` in PostgreSQL), in the order
their description in ``queries.sql`` lists: the puts' inserts, the one-tube claim,
the worker's ``delete_leased_job``. Verbs whose shape differs between dialects (how
an insert learns its id, how a claim folds in due jobs) are overridden by the
backend's subclass; the rest is written once, here (a SQLite subclass that writes a
due time must also tell its cache: ``sqlite/store.py``).

Every method takes an open connection inside the caller's transaction and the
time in ms (``now``), and either does its one thing or raises: JobNotFound when
no job matches, JobLost when a lease was given and is no longer live.
"""

from __future__ import annotations

import abc
import contextlib
import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ..allowance import allowance, spent_rate_at
from ..errors import JobCancelled, JobLost, JobNotFound
from ..model import ClaimRow, JobRow, cap_reason
from .sql import one
from .views import StoreViews

if TYPE_CHECKING:
    from .conn import Conn

#: Expired results purged per complete(): more than one, so purging outpaces expiry.
PURGE_BATCH = 64

#: What ``sqlq copy`` moves, table by table: the columns of each export_/import_ query.
COPIED: dict[str, tuple[str, ...]] = {
    "job": ("id", "tube", "priority", "state", "delay_until", "ttr", "body", "created_at",
            "reserves", "timeouts", "releases", "buries", "kicks", "bury_reason", "unique_key",
            "delay", "waiting_on", "dependents", "trace"),
    "edge": ("parent", "child"),
    "tube": ("name", "paused_until", "pause_ms", "concurrency", "rate", "rate_ms"),
    "result": ("job_id", "result", "expires_at"),
    "subscription": ("topic", "tube"),
    "periodic": ("name", "last_slot", "enqueued_at"),
}


class Store(StoreViews, abc.ABC):
    """A backend's SQL verbs. ``Q`` maps each query name to its statement."""

    Q: dict[str, str]
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
    #: Whether insert_puts is one statement (group commit may then run it alone, without
    #: BEGIN and COMMIT around it).
    ONE_STATEMENT_PUTS = False

    # -- dialect-specific --------------------------------------------------------------------

    @abc.abstractmethod
    def tubes_param(self, tubes: Sequence[str]) -> Any:
        """The :tubes parameter for claim, has_ready_job and next_due (the Queue caches it
        per distinct argument: a worker asks for the same tubes on every call)."""

    @abc.abstractmethod
    def ids_param(self, ids: Sequence[int]) -> Any:
        """A list of job ids as one parameter (hold_parents, insert_edges)."""

    @abc.abstractmethod
    def insert_waiting_job(self, conn: Conn, now: int, tube: str, priority: int,
                           delay_ms: int, ttr_ms: int, body: bytes, unique_key: str | None,
                           waiting_on: int) -> int | None:
        """Insert one job waiting for ``waiting_on`` parents; None if its unique key was
        taken meanwhile (the caller then reads the live job's id)."""

    @abc.abstractmethod
    def insert_job(self, conn: Conn, now: int, tube: str, priority: int, delay_ms: int,
                   ttr_ms: int, body: bytes, unique_key: str | None) -> int:
        """Insert one job; with a unique_key already live in the tube, return that
        job's id and insert nothing."""

    @abc.abstractmethod
    def insert_jobs(self, conn: Conn, now: int, tube: str, priority: int, delay_ms: int,
                    ttr_ms: int, bodies: Sequence[bytes]) -> list[int]:
        """Insert many jobs; return their ids, in order."""

    def insert_puts(self, conn: Conn, now: int,
                    puts: Sequence[tuple[str, int, int, int, bytes]]) -> list[int]:
        """Insert the jobs of several puts, each (tube, priority, delay_ms, ttr_ms, body)
        with its own options (threads' puts sharing one commit); their ids, in order."""
        return [self.insert_job(conn, now, *put, None) for put in puts]

    @abc.abstractmethod
    def claim(self, conn: Conn, now: int, tubes: Any, owner: str | None) -> ClaimRow | None:
        """Reserve the most urgent ready job in tubes (due delayed jobs and expired
        reservations count as ready) for owner; its claim row, or None."""

    @abc.abstractmethod
    def claim_many(self, conn: Conn, now: int, tubes: Any, owner: str | None, n: int
                   ) -> list[ClaimRow]:
        """claim for up to n jobs in one statement, each under a lease of its own; their
        claim rows in claim order (priority, then id)."""

    @abc.abstractmethod
    def delete_many(self, conn: Conn, now: int, leases: Sequence[tuple[int, int]]
                    ) -> list[tuple[int, int]]:
        """Delete each (id, lease) job under its live lease; return the (id, lease) pairs
        that were lost (the others are deleted all the same: an acknowledgement is never
        dropped). The caller raises JobLost for them once the transaction commits."""

    @abc.abstractmethod
    def total_jobs(self, conn: Conn) -> int:
        """How many ids were ever issued (beanstalkd's total-jobs of the file)."""

    # -- dependencies -----------------------------------------------------------------------

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
        highest = max(parents)
        if highest > self.total_jobs(conn):
            raise JobNotFound(f"job {highest} not found (after=)")
        if unique_key is not None:
            held = self.unique_job_id(conn, tube, unique_key)
            if held is not None:
                return [held]
        live = [int(r[0]) for r in conn.execute(
            self.Q["hold_parents"], {"parents": self.ids_param(parents), "n": len(bodies)})]
        if not live:
            if len(bodies) == 1:
                return [self.insert_job(conn, now, tube, priority, delay_ms, ttr_ms, bodies[0],
                                        unique_key)]
            return self.insert_jobs(conn, now, tube, priority, delay_ms, ttr_ms, bodies)
        ids = []
        for body in bodies:
            job_id = self.insert_waiting_job(conn, now, tube, priority, delay_ms, ttr_ms, body,
                                             unique_key, len(live))
            if job_id is None:  # the key's live job, put by a racing producer
                held = self.unique_job_id(conn, tube, unique_key or "")
                if held is None:
                    raise JobNotFound(f"unique key {unique_key!r}: its job just went")
                return [held]
            ids.append(job_id)
        conn.execute(self.Q["insert_edges"], {"parents": self.ids_param(live),
                                              "children": self.ids_param(ids)})
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

    # -- claims and waiting ------------------------------------------------------------------

    def delete_and_claim(self, conn: Conn, now: int, job_id: int, lease: int, tubes: Any,
                         owner: str | None) -> ClaimRow | None:
        """Delete a reserved job under its lease (JobLost if the lease is gone: nothing
        is claimed then) and claim the next, atomically: a worker's one commit per job."""
        self.delete(conn, now, job_id, lease)
        return self.claim(conn, now, tubes, owner)

    def delete_and_claim_many(self, conn: Conn, now: int, leases: Sequence[tuple[int, int]],
                              tubes: Any, owner: str | None, n: int
                              ) -> tuple[list[tuple[int, int]], list[ClaimRow]]:
        """delete_many, then, if no lease was lost, claim_many: (lost pairs, claim rows).
        With a lost lease nothing is claimed, and the other deletes stand."""
        lost = self.delete_many(conn, now, leases) if leases else []
        if lost:
            return lost, []
        return [], self.claim_many(conn, now, tubes, owner, n)

    def claim_by_id(self, conn: Conn, now: int, job_id: int, owner: str | None) -> ClaimRow:
        """beanstalkd's reserve-job: any job not reserved under a live lease."""
        row = one(conn, self.Q["claim_job_by_id"], {"id": job_id, "now": now, "owner": owner})
        if row is None:
            raise JobNotFound(f"job {job_id} not found or already reserved")
        return ClaimRow._make(row)

    def has_ready_job(self, conn: Conn, now: int, tubes: Any) -> bool:
        """Whether a claim would find a job now (a read a waiter makes before writing)."""
        return one(conn, self.Q["has_ready_job"], {"tubes": tubes, "now": now}) is not None

    def next_due(self, conn: Conn, now: int, tubes: Any) -> int | None:
        """The earliest time (ms) at which a job in these tubes may become ready, or None:
        a delayed job, a reservation's TTR, the end of a pause, a rate's next claim."""
        row = one(conn, self.Q["next_due"], {"tubes": tubes, "now": now})
        times = [t for t in row if t is not None]
        # A rate's next claim is a float (ms): rounded up, never early.
        return math.ceil(min(times)) if times else None

    # -- limits (sqlq/limits.py) -------------------------------------------------------------

    @abc.abstractmethod
    def tubes_of(self, tubes: Any) -> list[str]:
        """The tube names of a :tubes parameter (tubes_param's inverse)."""

    def limits_stamp(self) -> object:
        """A value that stays the same while no other connection commits (so no limit can
        have been set elsewhere), read by the last claim at no cost; None if the backend
        has none (the engine then reads limited_tubes after every claim that found
        nothing)."""
        return None

    def empty_claim_limited(self) -> bool | None:
        """Whether this thread's last :meth:`claim` that found nothing also found that a
        watched tube has limits, if the claim said so itself (then no read is needed);
        None if it did not (or was not the last thing asked). Asking forgets it."""
        return None

    def limited_tubes(self, conn: Conn, tubes: Any) -> bool:
        """Whether any of these tubes has limits (a read; the engine remembers it)."""
        return one(conn, self.Q["limited_tubes"], {"tubes": tubes}) is not None

    def claim_limited(self, conn: Conn, now: int, tubes: Any, owner: str | None, n: int
                      ) -> tuple[list[ClaimRow], bool]:
        """claim_many for tubes some of which have limits, inside the caller's write
        transaction: up to n jobs, the best first across the tubes, none beyond a limited
        tube's free slots or tokens, whose tokens are then spent. Returns the claim rows
        and whether any of the tubes had limits (if none, a plain claim was made).

        The limited tubes' rows are read first (PostgreSQL locks them: claims of a
        limited tube are serialised across sessions, each seeing the last one's commit;
        SQLite's write lock already serialises every claim)."""
        limits = [tuple(r) for r in conn.execute(self.Q["lock_limits"], {"tubes": tubes})]
        if not limits:
            if n == 1:
                row = self.claim(conn, now, tubes, owner)
                self.empty_claim_limited()  # the engine learns from this call's answer
                return ([] if row is None else [row]), False
            return self.claim_many(conn, now, tubes, owner, n), False
        live = {r[0]: int(r[1]) for r in conn.execute(self.Q["live_reservations"], {
            "tubes": self.tubes_param([r[0] for r in limits]), "now": now})}
        left = {name: allowance(cap, rate, rate_ms, rate_at, live.get(name, 0), now)
                for name, cap, rate, rate_ms, rate_at in limits}
        watched = self.tubes_of(tubes)
        rows: list[ClaimRow] = []
        while len(rows) < n:
            open_tubes = [t for t in watched if left.get(t, 1) > 0]
            row = self.claim_capped(conn, now, self.tubes_param(open_tubes), owner) \
                if open_tubes else None
            if row is None:
                break
            rows.append(row)
            if row.tube in left:
                left[row.tube] -= 1
        for name, _cap, rate, rate_ms, rate_at in limits:
            taken = sum(1 for r in rows if r.tube == name)
            if rate is not None and taken:
                conn.execute(self.Q["spend_rate"], {
                    "tube": name, "rate_at": spent_rate_at(rate, rate_ms, rate_at, now, taken)})
        capped = {name for name, cap, _rate, _ms, _at in limits if cap is not None}
        held = [r.id for r in rows if r.tube in capped]
        if held:
            self.mark_capped(conn, held)
        return rows, True

    def mark_capped(self, conn: Conn, ids: list[int]) -> None:  # noqa: B027 - most need none
        """Mark jobs claim_limited just took under a concurrency cap, if the backend's
        waiters need it: a backend whose worker deletes wake nobody (PostgreSQL) makes
        their deletes wake the waiters the cap holds back. Nothing by default: every
        commit wakes SQLite's."""

    @abc.abstractmethod
    def claim_capped(self, conn: Conn, now: int, tubes: Any, owner: str | None
                     ) -> ClaimRow | None:
        """claim, in tubes claim_limited chose: a tube with limits is not skipped
        (claim_job with capped true)."""

    def list_limits(self, conn: Conn, tube: str | None
                    ) -> list[tuple[str, int | None, int | None, int | None]]:
        """(tube, concurrency, rate, rate_ms) of every tube with limits, or of ``tube``."""
        return [(r[0], r[1], r[2], r[3])
                for r in conn.execute(self.Q["list_limits"], {"tube": tube})]

    def set_limits(self, conn: Conn, tube: str, concurrency: int | None, rate: int | None,
                   rate_ms: int | None) -> None:
        """Write the tube's limits, whole (None: none); a rate set anew starts full."""
        conn.execute(self.Q["set_limits"], {"tube": tube, "concurrency": concurrency,
                                            "rate": rate, "rate_ms": rate_ms}).fetchall()
        if concurrency is None and rate is None:
            conn.execute(self.Q["drop_limits_row"], {"tube": tube})

    # -- lease-checked and by-id verbs -------------------------------------------------------

    def _lease_failure(self, conn: Conn, job_id: int, lease: int | None) -> Exception:
        """Why a verb on a reserved job changed nothing.

        With a lease the caller held a reservation, and whatever became of the job
        since (expired, reserved again, or deleted by its next holder) that
        reservation is lost: JobLost. Without one (an administrator's verb by id),
        the job is missing or not reserved: JobNotFound. A lease lost because the job
        was cancelled (:meth:`cancel`) raises JobCancelled, a JobLost: only this failure
        path reads sqlq_cancelled.
        """
        if lease is not None:
            if self.cancelled_lease(conn, job_id) == lease:
                return JobCancelled(f"job {job_id} was cancelled", job_ids=(job_id,))
            return JobLost(f"job {job_id}: lease lost (TTR expired or reserved again)",
                           job_ids=(job_id,))
        if one(conn, self.Q["lease_state"], {"id": job_id}) is None:
            return JobNotFound(f"job {job_id} not found")
        return JobNotFound(f"job {job_id} is not reserved")

    def delete(self, conn: Conn, now: int, job_id: int, lease: int | None) -> str:
        """Delete the job (any state without a lease, else only under that live lease);
        return its tube. Its children, if any, are released in the same transaction."""
        if lease is None:
            row = one(conn, self.Q["delete_job"], {"id": job_id})
        else:
            row = one(conn, self.Q["delete_leased_job"], (job_id, lease, now))
        if row is not None:
            return str(row[0])
        # Nothing deleted: no such job, a lost lease, or a job with dependency edges, which
        # those statements leave to _delete_linked (this read only when they found nothing).
        links = one(conn, self.Q["job_links"], {"id": job_id})
        if links is not None and (links[0] or links[1]):
            tube = self._delete_linked(conn, now, job_id, lease)
            if tube is not None:
                return tube
        if lease is None:
            raise JobNotFound(f"job {job_id} not found")
        raise self._lease_failure(conn, job_id, lease)

    def _delete_linked(self, conn: Conn, now: int, job_id: int, lease: int | None
                       ) -> str | None:
        """Delete a job that has dependents or parents (by id, or under its live lease),
        release its children (each one parent less; ready, or delayed from now, at zero)
        and drop its edges, in one savepoint: the caller's transaction, or its own when
        the verb runs as a lone statement. Its tube, or None if nothing matched."""
        with self.savepoint(conn):
            row = one(conn, self.Q["delete_linked_job"], {"id": job_id, "lease": lease,
                                                          "now": now})
            if row is None:
                return None
            dependents, waiting_on = row[1], row[2]
            if dependents:
                self.release_children(conn, now, job_id)
            if waiting_on:
                conn.execute(self.Q["forget_child_edges"], {"id": job_id})
            return str(row[0])

    def release_children(self, conn: Conn, now: int, parent: int) -> None:
        """The children of ``parent``, gone in this transaction: each one parent less; at
        zero, ready, or delayed by its delay from now. The parent's edges go too."""
        conn.execute(self.Q["release_children"], {"id": parent, "now": now})

    @abc.abstractmethod
    def savepoint(self, conn: Conn) -> contextlib.AbstractContextManager[None]:
        """A savepoint on conn: inside a transaction, nested in it; else a transaction
        of its own, committed at the end of the block (rolled back on an exception)."""

    # -- control of running jobs (sqlq/control.py) ------------------------------------------

    def cancel(self, conn: Conn, now: int, job_id: int, keep_ms: int) -> str:
        """Delete a live job, as :meth:`delete` by id; a reserved one's (id, lease) is
        remembered until ``keep_ms`` after its lease's end, for its holder's next verb
        (JobCancelled). Older cancellations are purged on the way. Its tube."""
        # The purge first, holding no job's lock (PostgreSQL's cancel_state locks the job:
        # two cancels each holding a job and waiting on the other's purge could deadlock).
        conn.execute(self.Q["purge_cancelled"], {"now": now})
        row = one(conn, self.Q["cancel_state"], {"id": job_id, "now": now})
        if row is None:
            raise JobNotFound(f"job {job_id} not found")
        if row[1] is not None:
            conn.execute(self.Q["remember_cancelled"],
                         {"id": job_id, "lease": row[1], "until": row[2] + keep_ms})
        return self.delete(conn, now, job_id, None)

    def cancelled_lease(self, conn: Conn, job_id: int) -> int | None:
        """The lease job_id was cancelled under (recently), or None."""
        row = one(conn, self.Q["cancelled_lease"], {"id": job_id})
        return None if row is None else int(row[0])

    def cancelled_among(self, conn: Conn, ids: Sequence[int]) -> list[tuple[int, int]]:
        """(id, lease) of those of ``ids`` that were cancelled while reserved (recently)."""
        return [(int(r[0]), int(r[1])) for r in conn.execute(
            self.Q["cancelled_among"], {"ids": self.ids_param(ids)})]

    def set_progress(self, conn: Conn, now: int, job_id: int, lease: int | None,
                     progress: str, message: str | None) -> None:
        """Store a reserved job's progress (JSON text) and message, under its lease."""
        params = {"id": job_id, "lease": lease, "now": now, "progress": progress,
                  "message": message}
        if one(conn, self.Q["set_progress"], params) is None:
            raise self._lease_failure(conn, job_id, lease)

    def job_progress(self, conn: Conn, job_id: int) -> tuple[str | None, str | None] | None:
        """(progress as JSON text, message) of a job, or None if there is no such job."""
        row = one(conn, self.Q["job_progress"], {"id": job_id})
        return None if row is None else (row[0], row[1])

    def release(self, conn: Conn, now: int, job_id: int, lease: int | None,
                priority: int | None, delay_ms: int) -> None:
        """Put a reserved job back: ready, or delayed by delay_ms."""
        params = {"id": job_id, "lease": lease, "now": now, "priority": priority,
                  "delay": delay_ms, "delay_until": now + delay_ms if delay_ms else None}
        if one(conn, self.Q["release_job"], params) is None:
            raise self._lease_failure(conn, job_id, lease)

    def bury(self, conn: Conn, now: int, job_id: int, lease: int | None,
             priority: int | None, reason: str | None) -> None:
        """Park a reserved job until kicked, keeping reason: its first MESSAGE_LIMIT
        characters or so (model.cap), whoever gives it (a caller, a worker's failure)."""
        params = {"id": job_id, "lease": lease, "now": now, "priority": priority,
                  "reason": cap_reason(reason)}
        if one(conn, self.Q["bury_job"], params) is None:
            raise self._lease_failure(conn, job_id, lease)

    def touch(self, conn: Conn, now: int, job_id: int, lease: int | None) -> int:
        """Restart a reservation's TTR; return its new deadline (ms)."""
        row = one(conn, self.Q["touch_job"], {"id": job_id, "lease": lease, "now": now})
        if row is None:
            raise self._lease_failure(conn, job_id, lease)
        return int(row[0])

    def kick(self, conn: Conn, now: int, tube: str, bound: int) -> int:
        """Kick up to bound buried jobs in the tube; if there are none, delayed ones."""
        params = {"tube": tube, "bound": bound, "now": now}
        kicked = conn.execute(self.Q["kick_buried"], params).fetchall()
        if not kicked:
            kicked = conn.execute(self.Q["kick_delayed"], params).fetchall()
        return len(kicked)

    def kick_job(self, conn: Conn, now: int, job_id: int) -> None:
        """Move one buried or delayed job to ready."""
        if one(conn, self.Q["kick_job"], {"id": job_id, "now": now}) is None:
            raise JobNotFound(f"job {job_id} not found or not buried or delayed")

    def pause_tube(self, conn: Conn, now: int, tube: str, pause_ms: int) -> None:
        """Reserve nothing from tube until now + pause_ms."""
        conn.execute(self.Q["pause_tube"], {"tube": tube, "now": now, "pause_ms": pause_ms})

    # -- dead owners -------------------------------------------------------------------------

    def reserving_owners(self, conn: Conn, now: int, me: str) -> list[str]:
        """The other processes holding live reservations."""
        return [r[0] for r in conn.execute(self.Q["reserving_owners"], {"now": now, "owner": me})]

    def release_owner(self, conn: Conn, owner: str) -> int:
        """Give back every reservation of owner (it died or closed); how many."""
        return len(conn.execute(self.Q["release_owner"], {"owner": owner}).fetchall())

    # -- observers ---------------------------------------------------------------------------

    def select_job(self, conn: Conn, now: int, job_id: int) -> JobRow | None:
        """The job as an observer sees it now, or None."""
        row = one(conn, self.Q["select_job"], {"id": job_id, "now": now})
        return JobRow(*row) if row else None

    def peek_id(self, conn: Conn, now: int, which: str, tube: str) -> int | None:
        """The id peek_ready/_delayed/_buried (which) would show, or None."""
        row = one(conn, self.Q[f"peek_{which}_id"], {"tube": tube, "now": now})
        return int(row[0]) if row else None

    def count_jobs(self, conn: Conn, now: int, tube: str | None) -> dict[str, list[int]]:
        """tube -> [ready, urgent, reserved, delayed, buried, waiting] as of now."""
        return {r[0]: [int(x or 0) for x in r[1:]]
                for r in conn.execute(self.Q["count_jobs"], {"now": now, "tube": tube})}

    def change_token(self, conn: Conn) -> tuple[Any, ...]:
        """A value that differs whenever what this connection reads may have changed
        (another connection committed, or this one wrote) since it was last read."""
        return tuple(one(conn, self.Q["change_token"]))

    def list_tubes(self, conn: Conn, now: int) -> list[str]:
        """Tubes that hold jobs, are paused, or are subscribed to a topic."""
        return sorted(r[0] for r in conn.execute(self.Q["list_tubes"], {"now": now}))

    def tube_totals(self, conn: Conn, tube: str) -> tuple[int, int]:
        """(puts, pauses) of the tube since the database was created."""
        row = one(conn, self.Q["tube_totals"], {"tube": tube})
        return int(row[0]), int(row[1])

    def tube_pause(self, conn: Conn, tube: str) -> tuple[int, int] | None:
        """(paused_until, pause_ms) of the tube's last pause, or None."""
        row = one(conn, self.Q["tube_pause"], {"tube": tube})
        return (int(row[0]), int(row[1])) if row else None

    # -- results -----------------------------------------------------------------------------

    def complete(self, conn: Conn, now: int, job_id: int, lease: int | None, result: bytes,
                 expires_at: int) -> str:
        """Delete the job (as :meth:`delete`) and keep its result until expires_at; return
        its tube. A few expired results are purged on the way, so the table stays
        bounded without a reaper and without touching the claim path."""
        tube = self.delete(conn, now, job_id, lease)
        conn.execute(self.Q["insert_result"],
                     {"id": job_id, "result": result, "expires_at": expires_at})
        conn.execute(self.Q["purge_results"], {"now": now, "limit": PURGE_BATCH})
        return tube

    def result_outcome(self, conn: Conn, now: int, job_id: int
                       ) -> tuple[bytes | None, int | None, str | None]:
        """(result, job state, bury reason): the result if kept, else what the job is,
        else Nones."""
        row = one(conn, self.Q["result_outcome"], {"id": job_id, "now": now})
        result = None if row[0] is None else bytes(row[0])
        return result, row[1], row[2]

    # -- tracing (sqlq/tracing.py) ------------------------------------------------------------

    def set_trace(self, conn: Conn, ids: Sequence[int], trace: str) -> None:
        """Store a traced put's trace context on the jobs it just inserted."""
        conn.execute(self.Q["set_job_trace"], {"ids": self.ids_param(ids), "trace": trace})

    # -- topics ------------------------------------------------------------------------------

    def subscribe(self, conn: Conn, topic: str, tube: str) -> None:
        conn.execute(self.Q["subscribe"], {"topic": topic, "tube": tube})

    def unsubscribe(self, conn: Conn, topic: str, tube: str) -> bool:
        """True if the tube was subscribed to the topic."""
        return one(conn, self.Q["unsubscribe"], {"topic": topic, "tube": tube}) is not None

    def topic_tubes(self, conn: Conn, topic: str) -> list[str]:
        """The tubes publish(topic) fills, in name order."""
        return [r[0] for r in conn.execute(self.Q["topic_tubes"], {"topic": topic})]

    def list_subscriptions(self, conn: Conn, topic: str | None) -> list[tuple[str, str]]:
        return [(r[0], r[1]) for r in conn.execute(self.Q["list_subscriptions"],
                                                   {"topic": topic})]

    def count_topics(self, conn: Conn) -> int:
        return int(one(conn, self.Q["count_topics"])[0])

    # -- periodic tasks ----------------------------------------------------------------------

    def claim_periodic_slot(self, conn: Conn, now: int, name: str, slot: int) -> bool:
        """True if ``slot`` is later than the last slot recorded for periodic task ``name``
        (and is now recorded): the caller, and nobody else, puts the slot's job."""
        params = {"name": name, "slot": slot, "now": now}
        return one(conn, self.Q["claim_periodic_slot"], params) is not None

    # -- moving a database (sqlq copy) -------------------------------------------------------

    def begin_snapshot(self, conn: Conn) -> None:  # noqa: B027 - most dialects need nothing
        """Make the reads of the transaction just begun on conn see one snapshot (SQLite's
        transactions always do)."""

    def count_everything(self, conn: Conn) -> int:
        """Rows of every kind plus ids ever issued: 0 only for a database never used."""
        return int(one(conn, self.Q["count_everything"])[0])

    def export_rows(self, conn: Conn, kind: str, after: int = 0, limit: int = 500
                    ) -> list[tuple[Any, ...]]:
        """Rows of one kind of COPIED; jobs a page at a time (ids above ``after``)."""
        if kind == "job":
            return list(conn.execute(self.Q["export_job"], {"after": after, "limit": limit}))
        return list(conn.execute(self.Q[f"export_{kind}"]))

    def import_rows(self, conn: Conn, kind: str, rows: Sequence[Sequence[Any]]) -> None:
        """Insert rows of one kind of COPIED, as export_rows gave them."""
        columns = COPIED[kind]
        conn.cursor().executemany(self.Q[f"import_{kind}"],
                                  [dict(zip(columns, row, strict=True)) for row in rows])

    def set_total_jobs(self, conn: Conn, total: int) -> None:
        """Make the next id follow ``total`` (ids are never issued twice)."""
        conn.execute(self.Q["set_total_jobs"], {"total": total})
