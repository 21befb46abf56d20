"""SQLite's dialect of the verbs (``queries.sql`` beside this file).

Only what SQLite does differently from the shared :class:`~sqlq.backends.store.Store`
lives here: ids read with ``last_insert_rowid()`` and counted from
``sqlite_sequence``, the claim's ``promote_due`` step, and tube lists passed as
JSON for ``json_each``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ...errors import DatabaseError
from ...model import DELAYED, READY
from ..store import Store, load_queries, one

Q = load_queries(Path(__file__).with_name("queries.sql"))
# The hot path's statements, looked up once.
_INSERT_JOB = Q["insert_job"]
_PROMOTE_DUE = Q["promote_due"]
_CLAIM_JOB = Q["claim_job"]


class SQLiteStore(Store):
    Q = Q

    def tubes_param(self, tubes: Sequence[str]) -> str:
        return json.dumps(list(tubes))

    def insert_job(self, conn: Any, now: int, tube: str, priority: int, delay_ms: int,
                   ttr_ms: int, body: bytes, unique_key: str | None) -> int:
        if unique_key is not None:
            # Look first (we hold the write lock): an INSERT that conflicts would
            # still use up an id, and total-jobs counts ids.
            row = one(conn, self.Q["find_unique_job"], {"tube": tube, "unique_key": unique_key})
            if row is not None:
                return int(row[0])
        conn.execute(_INSERT_JOB, (tube, priority, DELAYED if delay_ms else READY,
                                        delay_ms, now + delay_ms if delay_ms else None, ttr_ms,
                                        body, now, unique_key))
        return int(conn.last_insert_rowid())

    def insert_jobs(self, conn: Any, now: int, tube: str, priority: int, delay_ms: int,
                    ttr_ms: int, bodies: Sequence[bytes]) -> list[int]:
        """One prepared statement for all. Under the write lock AUTOINCREMENT hands out
        consecutive ids, so they are counted rather than returned row by row (the
        sequence is checked at the end)."""
        row = (tube, priority, DELAYED if delay_ms else READY, delay_ms,
               now + delay_ms if delay_ms else None, ttr_ms)
        before = self.total_jobs(conn)
        conn.executemany(_INSERT_JOB, ((*row, body, now, None) for body in bodies))
        after = self.total_jobs(conn)
        if after - before != len(bodies):
            raise DatabaseError(f"job ids were not consecutive ({before}..{after})")
        return list(range(before + 1, after + 1))

    def claim(self, conn: Any, now: int, tubes: Any, owner: str | None) -> Any:
        """Due delayed jobs and expired reservations are written down as ready first, in
        the same transaction, so no separate reaper is needed."""
        params = {"tubes": tubes, "now": now, "owner": owner}
        conn.execute(_PROMOTE_DUE, params)
        return one(conn, _CLAIM_JOB, params)

    def claim_many(self, conn: Any, now: int, tubes: Any, owner: str | None, n: int
                   ) -> list[Any]:
        params = {"tubes": tubes, "now": now, "owner": owner, "n": n}
        conn.execute(_PROMOTE_DUE, params)
        rows = conn.execute(self.Q["claim_jobs"], params).fetchall()
        return sorted(rows, key=lambda r: (r[2], r[0]))

    def delete_many(self, conn: Any, now: int, leases: Sequence[tuple[int, int]]
                    ) -> list[tuple[int, int]]:
        pairs = [[job_id, lease] for job_id, lease in leases]
        gone = {(r[0], r[1]) for r in conn.execute(
            self.Q["delete_leased_jobs"], {"jobs": json.dumps(pairs), "now": now})}
        return [pair for pair in leases if pair not in gone]

    def total_jobs(self, conn: Any) -> int:
        return int(one(conn, self.Q["total_jobs"])[0])
