"""SQLite's dialect of the verbs (``queries.sql`` beside this file).

Only what SQLite does differently from the shared nouns (``backends/store/``) lives
here, in a subclass per noun that differs: ids read with ``last_insert_rowid()`` and
counted by ``total_jobs`` (the highest id issued, migration 0007; :class:`SQLiteJobs`),
the claim's ``promote_due`` step (skipped while nothing can be due: :class:`DueCache`),
tube lists passed as JSON for ``json_each``, and the claim of one tube without it
(:class:`SQLiteClaims`). :class:`SQLiteStore` builds them over one DueCache.

**The rule for a verb that writes a due time.** A statement that sets a job's
``delay_until`` or ``reserved_until`` to a time that may be earlier than any already
due (a put or release with a delay, any claim) runs in a method of a SQLite noun that
calls ``self.due.lower(when)`` with that time (a claim:
:meth:`SQLiteClaims._claimed`); one that writes jobs the store cannot follow calls
``self.due.forget()``. A shared noun's verb that does so is overridden here to make
that call. Otherwise the next claim in this process skips
``promote_due`` and leaves that job waiting until another connection commits.
Clearing a time (a kick, a bury, promote_due) or moving it later (a touch) needs
nothing: a cached time is only ever too early. tests/unit/test_due_rule.py lists
every statement of ``queries.sql`` that writes those columns and checks its verb."""

from __future__ import annotations

import contextlib
import functools
import operator
import os
import random
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

from ...model import DELAYED, READY, ClaimRow
from ...putting import Put
from ..sql import load_queries, one
from ..store import ClaimStore, CopyStore, JobStore, LimitStore, Store
from ..store.groups import FairClaim, Pick
from .drivers import SqliteConn, triggers_off
from .due import DUE_CACHE_SIZE, DueCache

if TYPE_CHECKING:
    from ...model import OnProgress

Q = load_queries(os.path.join(os.path.dirname(__file__), "queries.sql"), tight=True)
# The hot path's statements, looked up once.
_INSERT_JOB = Q["insert_job"]
_INSERT_READY_JOB = Q["insert_ready_job"]
_INSERT_JOB_AT = Q["insert_job_at"]
_INSERT_JOBS_AT = Q["insert_jobs_at"]
#: The rows of insert_jobs_at.
ROWS_AT_ONCE = 16
#: A put_many of at least this many jobs runs with the triggers off and counts its
#: tube's total itself (drivers.triggers_off): below it, statements prepared again
#: after the switch would cost more than the triggers' firings spared.
QUIET_BATCH = 64
_PROMOTE_DUE = Q["promote_due"]
_CLAIM_JOB = Q["claim_job"]
_CLAIM_JOB_IN_TUBE = Q["claim_job_in_tube"]
_CLAIM_JOBS_IN_TUBE = Q["claim_jobs_in_tube"]
_PICK_JOB_IN_TUBE = Q["pick_job_in_tube"]
_CLAIM_PICKED_JOB = Q["claim_picked_job"]
_PICK_JOBS_IN_TUBE = Q["pick_jobs_in_tube"]
_CLAIM_PICKED_RANGE = Q["claim_picked_range"]
_CLAIM_PICKED_JOBS = Q["claim_picked_jobs"]
#: A claim row's place in claim order: (priority, id).
_CLAIM_ORDER = operator.attrgetter("priority", "id")
#: ClaimRow._make without its length check (every claim's RETURNING is checked against
#: ClaimRow's fields by tests/unit/test_claim_row.py): 0.5 us less a claim.
_new = tuple.__new__
#: A claim's lease (claim_job, claim_job_in_tube bind it: queries.sql says why), as SQLite's
#: abs(random()) made it: 63 random bits (the random module reseeds in a forked child).
_lease = functools.partial(random.getrandbits, 63)
#: The base of a batch's leases (queries.sql pick_jobs_in_tube: each job's is base + id):
#: 62 bits, so that the sum stays below 2**63.
_lease_base = functools.partial(random.getrandbits, 62)
#: What a leased delete returns for its tube on SQLite (see SQLiteJobs.delete_leased).
_NO_TUBE = ("",)


#: set_ready_run's urgency while an import writes: no run of ready puts.
_SUSPENDED = -1


def end_ready_run(conn: SqliteConn, urgent: int | None = None) -> None:
    """Add the pending run of ready puts (migration 0007) to the kept counts and end it
    (``urgent`` None; _SUSPENDED: no run starts until set_ready_run says so)."""
    conn.execute(Q["fold_ready_run"])
    conn.execute(Q["set_ready_run"], {"urgent": urgent})


class SQLiteJobs(JobStore[SqliteConn]):
    """Ids from ``last_insert_rowid()`` and the highest id issued; a put or release with a
    delay, and children released at a delay, lower the DueCache."""

    def __init__(self, Q: dict[str, str], due: DueCache) -> None:
        super().__init__(Q)
        self.due = due

    def ids_param(self, ids: Sequence[int]) -> str:
        return "[" + ",".join(f"{i:d}" for i in ids) + "]"

    def insert_waiting_job(self, conn: SqliteConn, now: int, tube: str, priority: int,
                           delay_ms: int, ttr_ms: int, body: bytes, unique_key: str | None,
                           waiting_on: int) -> int | None:
        # No due time is written: the release writes it (delete_linked lowers the cache).
        return int(one(conn, self.Q["insert_waiting_job"], {
            "tube": tube, "priority": priority, "delay": delay_ms, "ttr": ttr_ms,
            "body": body, "now": now, "unique_key": unique_key, "waiting_on": waiting_on})[0])

    #: The record's INSERT ... SELECT and the job's DELETE: two statements (migration 0009).
    ONE_STATEMENT_DELETE = False

    def ended(self, conn: SqliteConn, job_ids: Sequence[int]) -> None:
        hot = conn.hot
        if len(job_ids) == 1:
            hot.execute(self.Q["delete_ended_job"], (job_ids[0],))
        elif job_ids:
            hot.execute(self.Q["delete_ended_jobs"], (self.ids_param(job_ids),))

    def delete_leased(self, conn: SqliteConn, now: int, job_id: int, lease: int
                      ) -> Sequence[Any] | None:
        # The worker's ack, on every job: the record's insert returns nothing (its tube is
        # '': no caller of a leased delete reads it), changes() says whether it found the
        # job, and then the job's DELETE by id.
        hot = conn.hot
        hot.execute(self.Q["delete_leased_job"], (job_id, lease, now))
        if not conn.changes():
            return None
        hot.execute(self.Q["delete_ended_job"], (job_id,))
        return _NO_TUBE

    def finished(self, conn: SqliteConn, now: int, job_id: int, tube: str, outcome: str,
                 actor: str | None, row: Sequence[Any]) -> None:
        state, owner, began, reserves, created_at, unique_key, head, group, steps = row
        reserved = state == 2
        conn.execute(self.Q["insert_finished"], {
            "id": job_id, "tube": tube, "grp": group, "outcome": outcome, "now": now,
            "worker": owner if reserved else None, "actor": actor,
            "ran": now - began if reserved else None, "attempts": reserves,
            "created_at": created_at, "unique_key": unique_key, "body": head,
            "steps": steps})

    @contextlib.contextmanager
    def savepoint(self, conn: SqliteConn) -> Iterator[None]:
        conn.execute("SAVEPOINT sqlq_linked")
        try:
            yield
        except BaseException:
            conn.execute("ROLLBACK TO sqlq_linked")
            conn.execute("RELEASE sqlq_linked")
            raise
        conn.execute("RELEASE sqlq_linked")

    def release_children(self, conn: SqliteConn, now: int, parent: int) -> None:
        times = [r[0] for r in conn.execute(self.Q["release_children"],
                                            {"id": parent, "now": now}).fetchall()
                 if r[0] is not None]
        if times:
            self.due.lower(min(times))
        conn.execute(self.Q["forget_parent_edges"], {"id": parent})

    def insert_job(self, conn: SqliteConn, now: int, tube: str, priority: int, delay_ms: int,
                   ttr_ms: int, body: bytes, unique_key: str | None) -> int:
        if unique_key is None and not delay_ms:  # the common put: ready now, no key
            conn.execute(_INSERT_READY_JOB, (tube, priority, ttr_ms, body, now))
            return int(conn.last_insert_rowid())
        if unique_key is not None:
            # Look first (we hold the write lock): an INSERT that conflicts would
            # still use up an id, and total-jobs counts ids.
            row = one(conn, self.Q["find_unique_job"], {"tube": tube, "unique_key": unique_key})
            if row is not None:
                return int(row[0])
        if delay_ms:
            self.due.lower(now + delay_ms)
        conn.execute(_INSERT_JOB, (tube, priority, DELAYED if delay_ms else READY,
                                        delay_ms, now + delay_ms if delay_ms else None, ttr_ms,
                                        body, now, unique_key))
        return int(conn.last_insert_rowid())

    def insert_jobs(self, conn: SqliteConn, now: int, tube: str, priority: int, delay_ms: int,
                    ttr_ms: int, bodies: Sequence[bytes]) -> list[int]:
        """One prepared statement for all, numbered from the highest id issued: the
        caller holds the write lock, so no other put can take an id in between."""
        row = (tube, priority, DELAYED if delay_ms else READY, delay_ms,
               now + delay_ms if delay_ms else None, ttr_ms)
        if delay_ms:
            self.due.lower(now + delay_ms)
        first = self.total_jobs(conn) + 1
        # ROWS_AT_ONCE rows a statement (queries.sql insert_jobs_at), the rest one by one.
        shared = (*row, now)
        whole = len(bodies) - len(bodies) % ROWS_AT_ONCE
        pairs: list[Any] = [None] * (2 * ROWS_AT_ONCE)

        def chunks() -> Iterator[tuple[Any, ...]]:
            for start in range(0, whole, ROWS_AT_ONCE):
                pairs[0::2] = range(first + start, first + start + ROWS_AT_ONCE)
                pairs[1::2] = bodies[start:start + ROWS_AT_ONCE]
                yield (*shared, *pairs)

        def insert() -> None:
            if whole:
                conn.executemany(_INSERT_JOBS_AT, chunks())
            if whole < len(bodies):
                conn.executemany(_INSERT_JOB_AT, ((first + i, *row, bodies[i], now, None)
                                                  for i in range(whole, len(bodies))))

        if len(bodies) < QUIET_BATCH:
            insert()
        else:
            end_ready_run(conn)  # its ids are the batch's from here on
            with triggers_off(conn) as off:
                insert()
            if off:  # the rows' tube total, counted once (sqlq_count_put did not fire)
                run = {"tube": tube, "first": first}
                conn.execute(Q["close_put_run"], run)
                conn.execute(Q["open_put_run"], run)
                conn.execute(Q["add_job_counts"], {  # nor its job counts
                    "tube": tube, "state": row[2], "priority": priority, "n": len(bodies)})
        return list(range(first, first + len(bodies)))

    def release(self, conn: SqliteConn, now: int, job_id: int, lease: int | None,
                priority: int | None, delay_ms: int) -> None:
        if delay_ms:
            self.due.lower(now + delay_ms)
        super().release(conn, now, job_id, lease, priority, delay_ms)

    def postpone(self, conn: SqliteConn, now: int, job_id: int, delay_ms: int) -> None:
        if delay_ms:
            self.due.lower(now + delay_ms)
        super().postpone(conn, now, job_id, delay_ms)

    def replace_job(self, conn: SqliteConn, now: int, tube: str, put: Put, body: bytes, *,
                    insert: bool) -> int | None:
        if put.delay_ms:
            self.due.lower(now + put.delay_ms)
        return super().replace_job(conn, now, tube, put, body, insert=insert)

    def total_jobs(self, conn: SqliteConn) -> int:
        return int(one(conn, self.Q["total_jobs"])[0])


class SQLiteClaims(ClaimStore[SqliteConn]):
    """promote_due before a claim (skipped while the DueCache proves nothing due), tube
    lists as JSON for ``json_each``, and the claim of one tube without it."""

    #: A claim outside a transaction would commit promote_due (when it runs) on its own,
    #: then the claim, each leaving the file consistent; but the engine's claims run
    #: inside BEGIN IMMEDIATE all the same (CLAIM_OUTSIDE_TRANSACTION False): there a
    #: claim is a read and an update by id or by one index range (queries.sql
    #: pick_job_in_tube, pick_jobs_in_tube), not an UPDATE whose RETURNING rows SQLite
    #: keeps in a temporary table opened and closed on every claim (and, for a batch,
    #: whose "id IN (SELECT ...)" builds an ephemeral index): 4-5k instructions a claim
    #: less, BEGIN and COMMIT included (bench_callgrind.py cycle, batch).
    CLAIM_OUTSIDE_TRANSACTION = False

    def __init__(self, Q: dict[str, str], jobs: SQLiteJobs, due: DueCache) -> None:
        super().__init__(Q, jobs)
        self.due = due
        #: The :tubes parameters made for one tube, and that tube: claim runs
        #: claim_job_in_tube for them (most workers watch one tube).
        self._one_tube: dict[str, str] = {}

    def tubes_param(self, tubes: Sequence[str]) -> str:
        import json  # a reserve's (the engine keeps the result): not a put's

        param = json.dumps(list(tubes))
        if len(tubes) == 1:
            if len(self._one_tube) >= DUE_CACHE_SIZE:
                self._one_tube.clear()
            self._one_tube[param] = tubes[0]
        return param

    def claim_capped(self, conn: SqliteConn, now: int, tubes: Any, owner: str | None
                     ) -> ClaimRow | None:
        self._promote(conn, now, tubes)
        row = one(conn, _CLAIM_JOB, {"tubes": tubes, "now": now, "owner": owner, "capped": 1,
                                     "lease": _lease()})
        if row is None:
            return None
        self.due.lower(row[12])  # reserved_until: the reservation ends then
        return _new(ClaimRow, row)

    def _promote(self, conn: SqliteConn, now: int, tubes: str) -> None:
        """Write down due delayed jobs and expired reservations as ready before a claim
        looks, so no separate reaper is needed; skipped while DueCache proves that
        nothing can be due."""
        nothing_due = self.due.nothing_due(conn, now, tubes)
        if nothing_due:
            return
        conn.execute(_PROMOTE_DUE, {"tubes": tubes, "now": now})
        if nothing_due is False:
            self.due.look(conn, now, tubes)  # keeps nothing inside a transaction

    def _claimed(self, rows: Sequence[ClaimRow]) -> None:
        """Reservations this connection made end at their reserved_until."""
        if rows:
            self.due.lower(min(r.reserved_until for r in rows))

    def has_ready_job(self, conn: SqliteConn, now: int, tubes: Any) -> bool:
        return self.due.look(conn, now, tubes)

    def promote_fair(self, conn: SqliteConn, now: int, tubes: Any) -> None:
        self._promote(conn, now, tubes)

    def claim_fair_head(self, conn: SqliteConn, now: int, tube: str, owner: str | None,
                        checked: bool) -> ClaimRow | None:
        row = super().claim_fair_head(conn, now, tube, owner, checked)
        if row is not None:
            self.due.lower(row.reserved_until)  # the reservation ends then
        return row

    def claim_fair(self, conn: SqliteConn, now: int, fair: FairClaim, pick: Pick,
                   owner: str | None) -> ClaimRow | None:
        row = super().claim_fair(conn, now, fair, pick, owner)
        if row is not None:
            self.due.lower(row.reserved_until)  # the reservation ends then
        return row

    def claim(self, conn: SqliteConn, now: int, tubes: Any, owner: str | None) -> ClaimRow | None:
        self._promote(conn, now, tubes)
        tube = self._one_tube.get(tubes)
        if tube is not None:
            hot = conn.hot  # drivers.ApswConnection: rows read at once
            if conn.get_autocommit():  # one statement, its own transaction (no caller in sqlq)
                rows = hot.execute(_CLAIM_JOB_IN_TUBE, (now, owner, tube, _lease())).fetchall()
            else:  # under the write lock (the engine's claims): no RETURNING (pick_job_in_tube)
                args = (now, owner, tube, _lease())
                rows = hot.execute(_PICK_JOB_IN_TUBE, args).fetchall()
                if rows:
                    hot.execute(_CLAIM_PICKED_JOB, (now, owner, rows[0][0], args[3]))
        else:
            rows = conn.execute(_CLAIM_JOB, {"tubes": tubes, "now": now, "owner": owner,
                                             "capped": 0, "lease": _lease()}).fetchall()
        if not rows:
            return None
        row = _new(ClaimRow, rows[0])
        self.due.lower(row.reserved_until)  # the reservation ends then
        return row

    def claim_many(self, conn: SqliteConn, now: int, tubes: Any, owner: str | None, n: int
                   ) -> list[ClaimRow]:
        self._promote(conn, now, tubes)
        tube = self._one_tube.get(tubes)
        if tube is not None and not conn.get_autocommit():
            # Under the write lock (the engine's claims): read, then claim what was read
            # (queries.sql pick_jobs_in_tube), already in claim order.
            hot = conn.hot
            base = _lease_base()
            picked = hot.execute(_PICK_JOBS_IN_TUBE, (now, owner, tube, base, n)).fetchall()
            if not picked:
                return []
            first, last = picked[0], picked[-1]
            if first[2] == last[2]:  # one priority: an id range of it
                hot.execute(_CLAIM_PICKED_RANGE, (now, owner, tube, base, last[2], first[0],
                                                  last[0]))
            else:
                hot.execute(_CLAIM_PICKED_JOBS, (now, owner, self.jobs.ids_param(
                    [r[0] for r in picked]), base))
            rows = [_new(ClaimRow, r) for r in picked]
            self._claimed(rows)
            return rows
        if tube is not None:  # one statement, its own transaction (no caller in sqlq)
            found = conn.hot.execute(_CLAIM_JOBS_IN_TUBE, (now, owner, tube, n))
        else:
            found = conn.execute(self.Q["claim_jobs"],
                                 {"tubes": tubes, "now": now, "owner": owner, "n": n})
        rows = [_new(ClaimRow, r) for r in found]
        self._claimed(rows)
        return sorted(rows, key=_CLAIM_ORDER)

    def claim_by_id(self, conn: SqliteConn, now: int, job_id: int, owner: str | None) -> ClaimRow:
        row = super().claim_by_id(conn, now, job_id, owner)
        self._claimed((row,))
        return row

    def delete_many(self, conn: SqliteConn, now: int, leases: Sequence[tuple[int, int]]
                    ) -> list[tuple[int, int]]:
        # The JSON array of pairs written directly, in a third of json.dumps' time (a
        # batch's fixed cost). ``:d`` takes ints only, as the ids and leases are. Each id
        # goes in once, with one of its leases: a pair left out is not "gone" and takes the
        # pair-by-pair path below, which tells a live lease from a lost one.
        leased = dict(leases)
        pairs = "[" + ",".join(f"[{job_id:d},{lease:d}]" for job_id, lease in leased.items()) + "]"
        conn.hot.execute(self.Q["delete_leased_jobs"], {"jobs": pairs, "now": now})
        if conn.changes() == len(leased):  # every job found under its lease: the usual case
            self.jobs.ended(conn, list(leased))
            gone = set(leased.items())
        else:  # one at a time (a record written already is written again, the same)
            gone = {pair for pair in leased.items()
                    if self.jobs.delete_leased(conn, now, *pair) is not None}
        # Lost leases, or parents (the statement skips jobs with dependents): each of
        # those deleted once with its release (a pair named twice as well), the others lost.
        linked = {pair: self.jobs.delete_linked(conn, now, *pair) is not None
                  for pair in dict.fromkeys(leases) if pair not in gone}
        return [pair for pair in leases if pair in linked and not linked[pair]]


class SQLiteLimits(LimitStore[SqliteConn]):
    """Tube lists as JSON; the limits' stamp is the DueCache's data_version."""

    def __init__(self, Q: dict[str, str], claims: SQLiteClaims, due: DueCache) -> None:
        super().__init__(Q, claims)
        self.due = due
        self._names: dict[str, list[str]] = {}

    def limits_stamp(self) -> object:
        # The PRAGMA data_version every claim's _promote read (DueCache.nothing_due): it
        # changes on every other connection's commit.
        return self.due.version

    def tubes_of(self, tubes: Any) -> list[str]:
        # A worker's claims ask for the same few lists (a grouped tube's, every claim).
        names = self._names.get(tubes)
        if names is None:
            import json

            if len(self._names) >= DUE_CACHE_SIZE:
                self._names.clear()
            names = self._names[tubes] = list(json.loads(tubes))
        return names


class SQLiteCopying(CopyStore[SqliteConn]):
    """An import writes jobs the DueCache cannot follow: it forgets what it knew."""

    def __init__(self, Q: dict[str, str], due: DueCache) -> None:
        super().__init__(Q)
        self.due = due

    def import_rows(self, conn: SqliteConn, kind: str, rows: Sequence[Sequence[Any]]) -> None:
        self.due.forget()
        if kind != "job":
            super().import_rows(conn, kind, rows)
            return
        # Imported ids are the source's, not the next ones: no run of ready puts
        # (migration 0007) may count them by their ids.
        end_ready_run(conn, _SUSPENDED)
        super().import_rows(conn, kind, rows)
        conn.execute(Q["set_ready_run"], {"urgent": None})

    def set_total_jobs(self, conn: SqliteConn, total: int) -> None:
        end_ready_run(conn)  # the next id jumps: the run's length would with it
        super().set_total_jobs(conn, total)


class SQLiteStore(Store[SqliteConn]):
    """SQLite's nouns over one :class:`DueCache`: the connection's, shared by every noun
    that writes a due time (jobs, claims, copying) or reads the cache (limits), since a
    time any of them writes can make another's cached "nothing due" wrong."""

    jobs: SQLiteJobs
    claims: SQLiteClaims
    limits: SQLiteLimits
    copying: SQLiteCopying
    Q = Q

    def __init__(self) -> None:
        self.due = DueCache(Q["look_ready"])
        jobs = SQLiteJobs(Q, self.due)
        claims = SQLiteClaims(Q, jobs, self.due)
        super().__init__(Q, jobs, claims, SQLiteLimits(Q, claims, self.due),
                         SQLiteCopying(Q, self.due))

    def put(self, conn: SqliteConn, now: int, put: Put, bodies: Sequence[bytes]) -> list[int]:
        # The common put (one body, ready now, no key, parents or trace) without the calls
        # of Store.put and JobStore.insert_job, whose first branch this is. One unpacking,
        # not eight attribute reads (Python 3.11 does not specialise a NamedTuple's fields).
        tube, priority, delay_ms, ttr_ms, unique_key, parents, trace, _, group = put
        if delay_ms == 0 and unique_key is None and trace is None and not parents \
                and group is None and len(bodies) == 1:
            # drivers.ApswConnection's kept cursor (sqlq.put(conn)'s sqlite3 adapter has one)
            conn.hot.execute(_INSERT_READY_JOB, (tube, priority, ttr_ms, bodies[0], now))
            if now < self.groups.look_at:  # no tube known grouped (groups.py)
                return [conn.last_insert_rowid()]
            ids = [conn.last_insert_rowid()]
            self.groups.plain_puts(conn, now, tube, ids, self.jobs.ids_param)
            return ids
        return super().put(conn, now, put, bodies)

    # -- the file's upkeep (SQLiteBackend.maintain, reclaim; horizon.WalWatch) --------------

    def maintain(self, conn: SqliteConn, step: OnProgress) -> dict[str, Any]:
        """Refresh the planner's statistics, checkpoint the WAL into the file and truncate
        it, check the file; ``step(done, fraction)`` after each of the three."""
        conn.execute(self.Q["optimize"]).fetchall()
        step(1, 1 / 3)
        busy, _, moved = conn.execute(self.Q["checkpoint"]).fetchall()[0]
        step(2, 2 / 3)
        page_size, pages, free, check = conn.execute(self.Q["file_health"]).fetchall()[0]
        step(3, 1.0)
        return {
            "checkpoint": "done" if not busy else "partial (readers were active)",
            "wal-frames-checkpointed": moved,
            "page-size": page_size,
            "pages": pages,
            "free-pages": free,
            "quick-check": check,
        }

    def reclaim_some(self, conn: SqliteConn, from_pages: int) -> int:
        """Give up to 500 free pages (queries.sql incremental_vacuum) back to the file
        system if a quarter of the file or more, and at least ``from_pages`` pages, is
        free; how many (0: none)."""
        mode, pages, free = conn.execute(self.Q["free_pages"]).fetchall()[0]
        if mode != 2 or free < from_pages or free * 4 < pages:
            return 0
        conn.execute(self.Q["incremental_vacuum"]).fetchall()
        return int(min(free, 500))

    def checkpoint_passive(self, conn: SqliteConn) -> tuple[int, int, int]:
        """A passive checkpoint: (frames in the WAL, frames copied, a frame's bytes);
        frames is negative when another process was checkpointing."""
        _, frames, copied = conn.execute(self.Q["checkpoint_passive"]).fetchall()[0]
        size = conn.execute(self.Q["wal_frame_size"]).fetchall()[0][0]
        return int(frames), int(copied), int(size)
