"""The record of finished jobs (``sqlq_finished``, issue 39): its reads and its pruning.

The records are written by the deletes themselves (``JobStore.delete`` and the batch
and delete-and-claim statements), in the transaction that ends the job; here are the
reads (``Queue.finished``, the dashboard's lists and search) and the retention's
statements, which sqlq/retention.py runs in short transactions of its own.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ..sql import one

if TYPE_CHECKING:
    from ..conn import Conn


class FinishedStore:
    """Reads and pruning of the finished records; retention settings."""

    def __init__(self, Q: dict[str, str]) -> None:
        self.Q = Q

    def record(self, conn: Conn, now: int, job_id: int) -> tuple[Any, ...] | None:
        """The job's record (with its kept result, its worker's host and pid), or None."""
        row = one(conn, self.Q["finished_job"], {"id": job_id, "now": now})
        return None if row is None else tuple(row)

    def done_under(self, conn: Conn, now: int, reservations: Sequence[tuple[int, int]],
                   owner: str | None) -> list[int]:
        """The ids among (id, reserves) pairs whose record says that reservation deleted
        the job: outcome ``done``, attempts (its reserves then) the same, and its holder
        ``owner`` (this process's token; a detached reservation's record names none).
        Each claim counts one more reserve, but a claim a server crash undid (in normal
        durability a claim does not wait for the WAL flush) leaves its count to the next
        claim, of another worker: the count alone once said "done" for that worker's
        delete (CI109, a PostgreSQL chaos run). For an acknowledgement cut off by a lost
        connection: a rare path, one read a job."""
        done = []
        for job_id, reserves in reservations:
            row = one(conn, self.Q["finished_job"], {"id": job_id, "now": now})
            if (row is not None and row[3] == "done" and int(row[8]) == reserves
                    and row[5] in (owner, None)):
                done.append(job_id)
        return done

    def page(self, conn: Conn, tube: str, outcome: str, at: int, after: int, limit: int
             ) -> list[tuple[Any, ...]]:
        """Records of one outcome in a tube, newest first, older than (at, after)."""
        return [tuple(r) for r in conn.execute(self.Q["list_finished"], {
            "tube": tube, "outcome": outcome, "at": at, "after": after, "limit": limit})]

    def search(self, conn: Conn, tube: str, outcome: str, text: str, depth: int,
               limit: int) -> list[tuple[Any, ...]]:
        """Records whose id, unique key or body's head holds ``text``, among the newest
        ``depth``."""
        return [tuple(r) for r in conn.execute(self.Q["search_finished"], {
            "tube": tube, "outcome": outcome, "text": text, "bytes": text.encode(),
            "depth": depth, "limit": limit})]

    def tubes(self, conn: Conn) -> list[str]:
        """The tubes that have records."""
        return [r[0] for r in conn.execute(self.Q["finished_tubes"])]

    def cutoff(self, conn: Conn, tube: str, outcome: str, keep: int) -> tuple[int, int] | None:
        """(ended_at, id) of the newest record that keeping ``keep`` drops, or None."""
        row = one(conn, self.Q["finished_cutoff"], {"tube": tube, "outcome": outcome,
                                                   "keep": keep})
        return None if row is None else (int(row[0]), int(row[1]))

    def prune(self, conn: Conn, tube: str, outcome: str, before: tuple[int, int],
              batch: int) -> int:
        """Delete up to ``batch`` of the oldest records below the key ``before``; how
        many."""
        return len(conn.execute(self.Q["prune_finished"], {
            "tube": tube, "outcome": outcome, "at": before[0], "id": before[1],
            "batch": batch}).fetchall())

    def set_retention(self, conn: Conn, tube: str, max_age: int | None,
                      max_count: int | None) -> None:
        """Set a tube's retention ('' every tube's); both None: back to the default."""
        if max_age is None and max_count is None:
            conn.execute(self.Q["drop_retention"], {"tube": tube})
        else:
            conn.execute(self.Q["set_retention"], {"tube": tube, "max_age": max_age,
                                                   "max_count": max_count})

    def retention(self, conn: Conn) -> list[tuple[str, int | None, int | None]]:
        return [(r[0], r[1], r[2]) for r in conn.execute(self.Q["list_retention"])]
