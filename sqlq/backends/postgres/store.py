"""PostgreSQL's dialect of the verbs (``queries.sql`` beside this file).

What differs from the shared nouns (``backends/store/``), in a subclass per noun: ids
come back with ``RETURNING`` (no single writer hands out consecutive ids), a unique key
is settled by the unique index (``ON CONFLICT DO NOTHING``: two producers may race;
:class:`PostgresJobs`), the claim folds due delayed jobs and expired reservations into
one statement from this process's floors (:class:`PostgresClaims`), and tube lists are
``text[]``. The owners' statements are used by ``owners.py`` (its ``OwnerStore``).
"""

from __future__ import annotations

import contextlib
import operator
import threading
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import psycopg

from ...model import DELAYED, READY, ClaimRow
from ..sql import load_queries, one
from ..store import ClaimStore, CopyStore, JobStore, LimitStore, Store
from ..store.claims import FAIR_PROMOTE_EVERY_MS
from ..store.groups import FairClaim, Pick
from ..store.jobs import lease_lost
from .db import ClaimLedger, PgConn
from .floors import CLAIM_COLUMNS, LIMITED, NO_SCAN, ClaimFloors

Q = load_queries(Path(__file__).with_name("queries.sql"))
#: The SQLSTATE sqlq_delete_and_claim raises when the lease no longer holds.
LEASE_LOST = "SQ001"
#: ... and when the job was cancelled under that lease (migration 0007).
CANCELLED = "SQ002"
_claim_row = ClaimRow._make
#: The statement that claims as each claim statement does, without its delete.
_CLAIM_ALONE = {"claim_job": "claim_job", "delete_and_claim": "claim_job",
                "claim_jobs": "claim_jobs", "delete_and_claim_jobs": "claim_jobs"}
#: A claim row's place in claim order: (priority, id).
_CLAIM_ORDER = operator.attrgetter("priority", "id")


def _put_params(now: int, tube: str, priority: int, delay_ms: int, ttr_ms: int) -> dict[str, Any]:
    return {"now": now, "tube": tube, "priority": priority,
            "state": DELAYED if delay_ms else READY, "delay": delay_ms,
            "delay_until": now + delay_ms if delay_ms else None, "ttr": ttr_ms}


def _claiming(conn: PgConn, owner: str | None, now: int) -> list[Any] | None:
    """Note a claim about to run in the connection's ledger (db.ClaimLedger)."""
    ledger = getattr(conn, "ledger", None)
    return None if ledger is None else ledger.claiming(owner, now)


def _claimed(entry: list[Any] | None, rows: Sequence[ClaimRow]) -> None:
    if entry is not None:
        ClaimLedger.claimed(entry, [r.id for r in rows])


def _claimed_one(entry: list[Any] | None, row: Any) -> ClaimRow | None:
    """The ClaimRow of a one-job claim's row (None: nothing claimed), noted in the ledger."""
    claimed = None if row is None else _claim_row(row[:CLAIM_COLUMNS])
    _claimed(entry, [] if claimed is None else [claimed])
    return claimed


class _EmptyClaim(threading.local):
    """What this thread's last plain claim that found nothing said of limits (None: not
    asked since)."""

    limited: bool | None = None


class PostgresJobs(JobStore[PgConn]):
    """Ids from ``RETURNING``; a unique key settled by the unique index."""

    ONE_STATEMENT_PUTS = True

    def ids_param(self, ids: Sequence[int]) -> list[int]:
        return list(ids)

    def insert_waiting_job(self, conn: PgConn, now: int, tube: str, priority: int,
                           delay_ms: int, ttr_ms: int, body: bytes, unique_key: str | None,
                           waiting_on: int) -> int | None:
        row = one(conn, Q["insert_waiting_job"], {
            "tube": tube, "priority": priority, "delay": delay_ms, "ttr": ttr_ms,
            "body": body, "now": now, "unique_key": unique_key, "waiting_on": waiting_on})
        return None if row is None else int(row[0])

    def savepoint(self, conn: PgConn) -> contextlib.AbstractContextManager[object]:
        return conn.transaction()

    def delete_leased(self, conn: PgConn, now: int, job_id: int, lease: int
                      ) -> Sequence[Any] | None:
        # now twice: the delete's test and the record's end (one statement, a CTE).
        rows = conn.execute(Q["delete_leased_job"], (job_id, lease, now, now)).fetchall()
        return rows[0] if rows else None

    def insert_job(self, conn: PgConn, now: int, tube: str, priority: int, delay_ms: int,
                   ttr_ms: int, body: bytes, unique_key: str | None) -> int:
        params = _put_params(now, tube, priority, delay_ms, ttr_ms)
        params["body"] = body
        if unique_key is None:
            return int(one(conn, Q["insert_job"], params)[0])
        # Look first: a conflicting INSERT would use up an id (total-jobs counts ids).
        row = one(conn, Q["find_unique_job"], {"tube": tube, "unique_key": unique_key})
        if row is not None:
            return int(row[0])
        params["unique_key"] = unique_key
        row = one(conn, Q["insert_unique_job"], params)
        if row is None:  # another producer's put of the key won the race (ON CONFLICT)
            row = one(conn, Q["find_unique_job"], {"tube": tube, "unique_key": unique_key})
        return int(row[0])

    def insert_jobs(self, conn: PgConn, now: int, tube: str, priority: int, delay_ms: int,
                    ttr_ms: int, bodies: Sequence[bytes]) -> list[int]:
        if not bodies:
            return []
        params = _put_params(now, tube, priority, delay_ms, ttr_ms)
        params["bodies"] = list(bodies)
        # One statement assigns ids in the order of its rows, so sorted ids are in
        # the order of the bodies (another session's ids may fall between them).
        return sorted(int(r[0]) for r in conn.execute(Q["insert_jobs"], params).fetchall())

    def insert_puts(self, conn: PgConn, now: int,
                    puts: Sequence[tuple[str, int, int, int, bytes]]) -> list[int]:
        tubes, priorities, delays, ttrs, bodies = (list(column) for column in zip(*puts,
                                                                                  strict=True))
        params = {"now": now, "tubes": tubes, "priorities": priorities, "delays": delays,
                  "ttrs": ttrs, "bodies": bodies}
        return sorted(int(r[0]) for r in conn.execute(Q["insert_puts"], params).fetchall())

    def total_jobs(self, conn: PgConn) -> int:
        return int(one(conn, Q["total_jobs"])[0])


class PostgresClaims(ClaimStore[PgConn]):
    """One statement per claim, read from this process's floors (floors.py), each noted
    in the connection's claim ledger (db.ClaimLedger)."""

    FAIR_PROMOTE_EVERY_MS = FAIR_PROMOTE_EVERY_MS

    LOOK_BEFORE_CLAIM = False
    ONE_STATEMENT_CLAIM = True
    CLAIM_OUTSIDE_TRANSACTION = True

    def __init__(self, Q: dict[str, str], jobs: JobStore[PgConn], empty: _EmptyClaim) -> None:
        super().__init__(Q, jobs)
        self._empty = empty
        self.floors = ClaimFloors()

    def tubes_param(self, tubes: Sequence[str]) -> list[str]:
        return list(tubes)

    def claim_capped(self, conn: PgConn, now: int, tubes: Any, owner: str | None
                     ) -> ClaimRow | None:
        entry = _claiming(conn, owner, now)
        rows = self._claim_rows(conn, "claim_job", now, tubes,
                                {"owner": owner, "capped": True})
        return _claimed_one(entry, rows[0] if rows[0][0] is not None else None)

    def _claim_rows(self, conn: PgConn, name: str, now: int, tubes: Any,
                    params: dict[str, Any]) -> list[Any]:
        """Run the claim statement ``name`` from this process's floors (floors.py), and
        learn what it says of them; its rows."""
        if not tubes:  # a delete_many: no claim, nothing to learn
            params.update(NO_SCAN, tubes=tubes, now=now)
            return conn.execute(Q[name], params).fetchall()
        scan = self.floors.scan(tubes, now)
        params.update(scan.params, tubes=tubes, now=now)
        rows = conn.execute(Q[name], params).fetchall()
        self.floors.learn(scan, rows, now)
        if not scan.full and (not rows or rows[0][0] is None) and params.get("n", 1):
            # Nothing above the floors: read every band whole, if not done a moment ago
            # (floors.py EMPTY_RESCAN_S), for a put that slipped below one. The delete,
            # if any, is done: the claim alone again.
            scan = self.floors.scan(tubes, now)
            if scan.full:
                name = _CLAIM_ALONE[name]
                params.update(scan.params, capped=params.get("capped", False))
                rows = conn.execute(Q[name], params).fetchall()
                self.floors.learn(scan, rows, now)
        return rows

    def claim(self, conn: PgConn, now: int, tubes: Any, owner: str | None) -> ClaimRow | None:
        entry = _claiming(conn, owner, now)
        row = self._claim_rows(conn, "claim_job", now, tubes,
                               {"owner": owner, "capped": False})[0]
        if row[0] is None:  # nothing claimed: whether a watched tube has limits
            self._empty.limited = bool(row[LIMITED])
            row = None
        return _claimed_one(entry, row)

    def delete_and_claim(self, conn: PgConn, now: int, job_id: int, lease: int, tubes: Any,
                         owner: str | None) -> ClaimRow | None:
        params = {"id": job_id, "lease": lease, "owner": owner}
        entry = _claiming(conn, owner, now)
        try:
            rows = self._claim_rows(conn, "delete_and_claim", now, tubes, params)
            # No row: nothing claimed; a row of NULLs: nor by claim_job after it (a retry
            # that read every band, _claim_rows).
            row = rows[0] if rows and rows[0][0] is not None else None
        except psycopg.Error as e:
            # The function says why (inside a transaction the error aborted it: no read
            # after it could).
            if e.sqlstate in (LEASE_LOST, CANCELLED):
                raise lease_lost(job_id, cancelled=e.sqlstate == CANCELLED) from None
            raise
        return _claimed_one(entry, row)

    def claim_many(self, conn: PgConn, now: int, tubes: Any, owner: str | None, n: int
                   ) -> list[ClaimRow]:
        entry = _claiming(conn, owner, now)
        found = self._claim_rows(conn, "claim_jobs", now, tubes, {"owner": owner, "n": n})
        rows = [_claim_row(r[:CLAIM_COLUMNS]) for r in found]
        _claimed(entry, rows)
        return sorted(rows, key=_CLAIM_ORDER)

    def claim_fair_head(self, conn: PgConn, now: int, tube: str, owner: str | None,
                        checked: bool) -> ClaimRow | None:
        entry = _claiming(conn, owner, now)
        row = super().claim_fair_head(conn, now, tube, owner, checked)
        _claimed(entry, [] if row is None else [row])
        return row

    def claim_fair(self, conn: PgConn, now: int, fair: FairClaim, pick: Pick,
                   owner: str | None) -> ClaimRow | None:
        entry = _claiming(conn, owner, now)
        row = super().claim_fair(conn, now, fair, pick, owner)
        _claimed(entry, [] if row is None else [row])
        return row

    def claim_by_id(self, conn: PgConn, now: int, job_id: int, owner: str | None) -> ClaimRow:
        entry = _claiming(conn, owner, now)
        row = super().claim_by_id(conn, now, job_id, owner)
        _claimed(entry, [row])
        return row

    def release_unseen_claim(self, conn: PgConn, owner: str, now: int, known: list[int]) -> int:
        """Give back the jobs a claim cut off by a lost connection may have taken."""
        return len(conn.execute(Q["release_unseen_claim"],
                                {"owner": owner, "now": now, "known": known}).fetchall())

    def release_unseen_claims(self, conn: PgConn,
                              unseen: Iterable[tuple[str, int, list[int]]]) -> int:
        """:meth:`release_unseen_claim` for each (owner, now, known) of a ledger's take."""
        return sum(self.release_unseen_claim(conn, *claim) for claim in unseen)

    def delete_and_claim_many(self, conn: PgConn, now: int, leases: Sequence[tuple[int, int]],
                              tubes: Any, owner: str | None, n: int
                              ) -> tuple[list[tuple[int, int]], list[ClaimRow]]:
        """One statement (sqlq_delete_and_claim_many): a row without a tube names a job
        and the lease of it that was lost (its other columns NULL)."""
        params = {"ids": [job_id for job_id, _ in leases],
                  "leases": [lease for _, lease in leases], "owner": owner, "n": n}
        entry = _claiming(conn, owner, now) if n else None
        rows = [_claim_row(r[:CLAIM_COLUMNS])
                for r in self._claim_rows(conn, "delete_and_claim_jobs", now, tubes, params)]
        lost = [(r.id, r.lease) for r in rows if r.tube is None]
        if lost:
            return lost, []
        _claimed(entry, rows)
        return [], sorted(rows, key=_CLAIM_ORDER)

    def delete_many(self, conn: PgConn, now: int, leases: Sequence[tuple[int, int]]
                    ) -> list[tuple[int, int]]:
        return self.delete_and_claim_many(conn, now, leases, [], None, 0)[0]


class PostgresLimits(LimitStore[PgConn]):
    """A plain claim that found nothing says itself whether a watched tube has limits
    (``_EmptyClaim``, shared with the claims); capped claims mark their jobs."""

    def __init__(self, Q: dict[str, str], claims: ClaimStore[PgConn], empty: _EmptyClaim) -> None:
        super().__init__(Q, claims)
        self._empty = empty

    def tubes_of(self, tubes: Any) -> list[str]:
        return list(tubes)

    def empty_claim_limited(self) -> bool | None:
        limited, self._empty.limited = self._empty.limited, None
        return limited

    def mark_capped(self, conn: PgConn, ids: list[int]) -> None:
        """Their deletes send NOTIFY: a reserve may be blocked on the slot they free
        (migration 0016). The plain claim marks nothing."""
        conn.execute(Q["mark_capped"], {"ids": ids})


class PostgresCopying(CopyStore[PgConn]):
    """An export reads one snapshot only if its transaction asks for it; jobs are
    imported a page a statement (``import_job``: a statement trigger counts puts)."""

    def begin_snapshot(self, conn: PgConn) -> None:
        conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")

    def import_rows(self, conn: PgConn, kind: str, rows: Sequence[Sequence[Any]]) -> None:
        if kind != "job":
            super().import_rows(conn, kind, rows)
        elif rows:
            columns = zip(*rows, strict=True)
            conn.execute(Q["import_job"], dict(zip(self.COPIED["job"], map(list, columns),
                                                   strict=True)))


class PostgresStore(Store[PgConn]):
    """PostgreSQL's nouns; the claims and limits share what this thread's last empty
    claim said of limits."""

    jobs: PostgresJobs
    claims: PostgresClaims
    limits: PostgresLimits
    Q = Q

    def __init__(self) -> None:
        empty = _EmptyClaim()
        jobs = PostgresJobs(Q)
        claims = PostgresClaims(Q, jobs, empty)
        super().__init__(Q, jobs, claims, PostgresLimits(Q, claims, empty),
                         PostgresCopying(Q))

    def vacuum_jobs(self, conn: PgConn) -> dict[str, Any]:
        """VACUUM the hot table (outside a transaction: autocommit), then each table's
        live and dead rows and when it was last vacuumed (PostgresBackend.maintain)."""
        conn.execute(self.Q["vacuum_jobs"])
        report: dict[str, Any] = {}
        for table, live, dead, vacuumed in conn.execute(self.Q["table_health"]):
            report[f"{table}-rows"] = live
            report[f"{table}-dead-rows"] = dead
            report[f"{table}-vacuumed-at"] = vacuumed
        return report
