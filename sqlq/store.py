"""Storage: the only module that executes sqlq's SQL (``queries.sql``).

Functions take an open apsw connection (inside the caller's transaction) and
the time in ms, and do one thing to the jobs table. Keeping SQL and dialect
details here means another backend (PostgreSQL) replaces this module and
``db.py`` and nothing else.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Sequence
from typing import Any

import apsw

from .errors import DatabaseError, JobLost, JobNotFound
from .model import BURIED, DELAYED, READY, RESERVED, JobRow

_BLOCK = re.compile(r"^-- name: (\w+)\n", re.MULTILINE)


def _load_queries() -> dict[str, str]:
    with open(os.path.join(os.path.dirname(__file__), "queries.sql")) as f:
        text = f.read()
    parts = _BLOCK.split(text)
    return {name: sql.strip() for name, sql in zip(parts[1::2], parts[2::2], strict=True)}


Q = _load_queries()


def _one(conn: apsw.Connection, sql: str, params: dict[str, Any] | None = None) -> Any:
    """The first row of a statement, or None (typed Any: rows are tuples of SQL values).

    The statement is always run to its end, so an autocommit write (Database.write
    with single=True) commits here, not whenever the cursor is collected.
    """
    rows = conn.execute(sql, params or {}).fetchall()
    return rows[0] if rows else None


_INSERT_JOB = Q["insert_job"]
_PROMOTE_DUE = Q["promote_due"]
_CLAIM_JOB = Q["claim_job"]


def tubes_json(tubes: Sequence[str]) -> str:
    """The :tubes parameter: a JSON array (Queue caches it per distinct argument)."""
    return json.dumps(list(tubes))


# -- put ---------------------------------------------------------------------------------------

def insert_job(conn: apsw.Connection, now: int, tube: str, priority: int, delay_ms: int,
               ttr_ms: int, body: bytes, unique_key: str | None) -> int:
    """Insert one job; with a unique_key already live in the tube, return that job's id."""
    if unique_key is not None:
        # Look first (we hold the write lock): an INSERT that conflicts would
        # still use up an id, and total-jobs counts ids.
        row = _one(conn, Q["find_unique_job"], {"tube": tube, "unique_key": unique_key})
        if row is not None:
            return int(row[0])
    conn.execute(_INSERT_JOB, (tube, priority, DELAYED if delay_ms else READY, delay_ms,
                               now + delay_ms if delay_ms else None, ttr_ms, body, now,
                               unique_key))
    return conn.last_insert_rowid()


def insert_jobs(conn: apsw.Connection, now: int, tube: str, priority: int, delay_ms: int,
                ttr_ms: int, bodies: Sequence[bytes]) -> list[int]:
    """Insert many jobs with one prepared statement; return their ids, in order.

    Under the write lock AUTOINCREMENT hands out consecutive ids, so they are
    counted rather than returned row by row (the sequence is checked at the end).
    """
    row = (tube, priority, DELAYED if delay_ms else READY, delay_ms,
           now + delay_ms if delay_ms else None, ttr_ms)
    before = total_jobs(conn)
    conn.executemany(_INSERT_JOB, ((*row, body, now, None) for body in bodies))
    after = total_jobs(conn)
    if after - before != len(bodies):
        raise DatabaseError(f"job ids were not consecutive ({before}..{after})")
    return list(range(before + 1, after + 1))


# -- claim -------------------------------------------------------------------------------------

def claim(conn: apsw.Connection, now: int, tubes: str, owner: str | None) -> Any:
    """Reserve the most urgent ready job in the JSON list of tubes, or return None.

    Due delayed jobs and expired reservations are written down as ready first,
    in the same transaction, so no separate reaper is needed.
    """
    params = {"tubes": tubes, "now": now, "owner": owner}
    conn.execute(_PROMOTE_DUE, params)
    return _one(conn, _CLAIM_JOB, params)


def claim_by_id(conn: apsw.Connection, now: int, job_id: int, owner: str | None) -> Any:
    row = _one(conn, Q["claim_job_by_id"], {"id": job_id, "now": now, "owner": owner})
    if row is None:
        raise JobNotFound(f"job {job_id} not found or already reserved")
    return row


def has_ready_job(conn: apsw.Connection, now: int, tubes: str) -> bool:
    return _one(conn, Q["has_ready_job"], {"tubes": tubes, "now": now}) is not None


def next_due(conn: apsw.Connection, now: int, tubes: str) -> int | None:
    """The earliest time (ms) at which a job in these tubes may become ready, or None."""
    row = _one(conn, Q["next_due"], {"tubes": tubes, "now": now})
    times = [t for t in row if t is not None]
    return min(times) if times else None


# -- lease-checked and by-id verbs -------------------------------------------------------------

def _lease_failure(conn: apsw.Connection, job_id: int, now: int, lease: int | None) -> Exception:
    """Why a verb on a reserved job changed nothing: JobLost for any stale lease, else
    JobNotFound.

    A lease that no longer holds is JobLost whatever became of the job since (released,
    reserved again, or deleted by the next holder): the holder's one question is "is
    the job still mine?", and a worker that overran its TTR must carry on, not crash on
    a JobNotFound. Only the administrator's by-id verbs (no lease) learn "not found".
    """
    if lease is not None:
        return JobLost(f"job {job_id}: lease lost (TTR expired, or reserved again since)")
    if _one(conn, Q["lease_state"], {"id": job_id}) is None:
        return JobNotFound(f"job {job_id} not found")
    return JobNotFound(f"job {job_id} is not reserved")


def delete(conn: apsw.Connection, now: int, job_id: int, lease: int | None) -> str:
    """Delete the job (any state without a lease, else only under that live lease);
    return its tube."""
    if lease is None:
        row = _one(conn, Q["delete_job"], {"id": job_id})
        if row is None:
            raise JobNotFound(f"job {job_id} not found")
        return str(row[0])
    row = _one(conn, Q["delete_leased_job"], {"id": job_id, "lease": lease, "now": now})
    if row is None:
        raise _lease_failure(conn, job_id, now, lease)
    return str(row[0])


def release(conn: apsw.Connection, now: int, job_id: int, lease: int | None,
            priority: int | None, delay_ms: int) -> None:
    params = {"id": job_id, "lease": lease, "now": now, "priority": priority,
              "delay": delay_ms, "delay_until": now + delay_ms if delay_ms else None}
    if _one(conn, Q["release_job"], params) is None:
        raise _lease_failure(conn, job_id, now, lease)


def bury(conn: apsw.Connection, now: int, job_id: int, lease: int | None,
         priority: int | None, reason: str | None) -> None:
    params = {"id": job_id, "lease": lease, "now": now, "priority": priority, "reason": reason}
    if _one(conn, Q["bury_job"], params) is None:
        raise _lease_failure(conn, job_id, now, lease)


def touch(conn: apsw.Connection, now: int, job_id: int, lease: int | None) -> int:
    row = _one(conn, Q["touch_job"], {"id": job_id, "lease": lease, "now": now})
    if row is None:
        raise _lease_failure(conn, job_id, now, lease)
    return int(row[0])


def kick(conn: apsw.Connection, now: int, tube: str, bound: int) -> int:
    """Kick up to bound buried jobs in the tube; if there are none, delayed ones."""
    params = {"tube": tube, "bound": bound, "now": now}
    kicked = conn.execute(Q["kick_buried"], params).fetchall()
    if not kicked:
        kicked = conn.execute(Q["kick_delayed"], params).fetchall()
    return len(kicked)


def kick_job(conn: apsw.Connection, now: int, job_id: int) -> None:
    if _one(conn, Q["kick_job"], {"id": job_id, "now": now}) is None:
        raise JobNotFound(f"job {job_id} not found or not buried or delayed")


def pause_tube(conn: apsw.Connection, now: int, tube: str, pause_ms: int) -> None:
    conn.execute(Q["pause_tube"], {"tube": tube, "now": now, "pause_ms": pause_ms})


# -- dead owners -------------------------------------------------------------------------------

def reserving_owners(conn: apsw.Connection, now: int, me: str) -> list[str]:
    return [r[0] for r in conn.execute(Q["reserving_owners"], {"now": now, "owner": me})]


def release_owner(conn: apsw.Connection, owner: str) -> int:
    return len(conn.execute(Q["release_owner"], {"owner": owner}).fetchall())


# -- observers ---------------------------------------------------------------------------------

def select_job(conn: apsw.Connection, now: int, job_id: int) -> JobRow | None:
    row = _one(conn, Q["select_job"], {"id": job_id, "now": now})
    return JobRow(*row) if row else None


def peek_id(conn: apsw.Connection, now: int, which: str, tube: str) -> int | None:
    row = _one(conn, Q[f"peek_{which}_id"], {"tube": tube, "now": now})
    return row[0] if row else None


def count_jobs(conn: apsw.Connection, now: int, tube: str | None) -> dict[str, list[int]]:
    """tube -> [ready, urgent, reserved, delayed, buried] as of now."""
    return {r[0]: [int(x or 0) for x in r[1:]]
            for r in conn.execute(Q["count_jobs"], {"now": now, "tube": tube})}


def total_jobs(conn: apsw.Connection) -> int:
    return int(_one(conn, Q["total_jobs"])[0])


def list_tubes(conn: apsw.Connection, now: int) -> list[str]:
    return sorted(r[0] for r in conn.execute(Q["list_tubes"], {"now": now}))


def tube_pause(conn: apsw.Connection, tube: str) -> tuple[int, int] | None:
    row = _one(conn, Q["tube_pause"], {"tube": tube})
    return (row[0], row[1]) if row else None


# -- results -----------------------------------------------------------------------------------

#: Expired results purged per complete(): more than one, so purging outpaces expiry.
PURGE_BATCH = 64


def complete(conn: apsw.Connection, now: int, job_id: int, lease: int | None, result: bytes,
             expires_at: int) -> str:
    """Delete the job (as :func:`delete`) and keep its result until expires_at; return its tube.

    A few expired results are purged on the way, so the table stays bounded
    without a reaper and without touching the claim path.
    """
    tube = delete(conn, now, job_id, lease)
    conn.execute(Q["insert_result"], {"id": job_id, "result": result, "expires_at": expires_at})
    conn.execute(Q["purge_results"], {"now": now, "limit": PURGE_BATCH})
    return tube


def result_outcome(conn: apsw.Connection, now: int, job_id: int
                   ) -> tuple[bytes | None, int | None, str | None]:
    """(result, job state, bury reason): the result if kept, else what the job is, else Nones."""
    row = _one(conn, Q["result_outcome"], {"id": job_id, "now": now})
    return row[0], row[1], row[2]


# -- topics ------------------------------------------------------------------------------------

def subscribe(conn: apsw.Connection, topic: str, tube: str) -> None:
    conn.execute(Q["subscribe"], {"topic": topic, "tube": tube})


def unsubscribe(conn: apsw.Connection, topic: str, tube: str) -> bool:
    """True if the tube was subscribed to the topic."""
    return _one(conn, Q["unsubscribe"], {"topic": topic, "tube": tube}) is not None


def topic_tubes(conn: apsw.Connection, topic: str) -> list[str]:
    return [r[0] for r in conn.execute(Q["topic_tubes"], {"topic": topic})]


def list_subscriptions(conn: apsw.Connection, topic: str | None) -> list[tuple[str, str]]:
    return [(r[0], r[1]) for r in conn.execute(Q["list_subscriptions"], {"topic": topic})]


def count_topics(conn: apsw.Connection) -> int:
    return int(_one(conn, Q["count_topics"])[0])


def tube_subscribed(conn: apsw.Connection, tube: str) -> bool:
    return _one(conn, Q["tube_subscribed"], {"tube": tube}) is not None


# -- periodic tasks ----------------------------------------------------------------------------

def claim_periodic_slot(conn: apsw.Connection, now: int, name: str, slot: int) -> bool:
    """True if ``slot`` is later than the last slot recorded for periodic task ``name``
    (and is now recorded): the caller, and nobody else, puts the slot's job."""
    params = {"name": name, "slot": slot, "now": now}
    return conn.execute(Q["claim_periodic_slot"], params).fetchone() is not None


__all__ = ["BURIED", "DELAYED", "READY", "RESERVED", "Q", "tubes_json"]
