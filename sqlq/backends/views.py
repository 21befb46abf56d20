"""The store's read-only views for operators, and the records kept beside the queue
for them: the dashboard's and /metrics' reads (observe.py), failed jobs grouped by error
(failures.py), the failed attempts kept per job (attempts.py), the workers registry and
the throughput history (registry.py, throughput.py). A mixin of
:class:`~sqlq.backends.store.Store`, over the same named statements (``self.Q``), so
that store.py keeps the verbs of the queue itself."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from .sql import one

if TYPE_CHECKING:
    from .conn import Conn

#: The states a job list can show, each in its own index's order.
LIST_STATES = ("ready", "delayed", "reserved", "buried", "waiting")


class StoreViews:
    """Reads for operators (and the few writes of their records)."""

    #: The dialect's statements by name (queries.sql), as Store's.
    Q: dict[str, str]

    # -- views for the dashboard and /metrics (observe.py) ------------------------------------

    def tube_names(self, conn: Conn, now: int) -> list[str]:
        """Tubes with jobs, paused or subscribed, without reading every job (list_tubes
        does): a hop from tube to tube in each state's index."""
        return sorted(r[0] for r in conn.execute(self.Q["tube_names"], {"now": now}))

    def known_tubes(self, conn: Conn) -> list[str]:
        """Tubes with counters, a pause (past or present) or histograms: known, if empty."""
        return sorted(r[0] for r in conn.execute(self.Q["known_tubes"]))

    def tube_counts(self, conn: Conn, now: int, tube: str) -> tuple[Any, ...]:
        """(ready, urgent, reserved, delayed, buried, oldest ready created_at, earliest due
        delay_until, paused_until) of one tube as of now."""
        row = one(conn, self.Q["tube_counts"], {"now": now, "tube": tube})
        oldest = None
        if row[5] is not None:
            found = one(conn, self.Q["job_created_at"], {"id": row[5]})
            oldest = found[0] if found else None
        return (*(int(n) for n in row[:5]), oldest, *row[6:])

    def job_trace(self, conn: Conn, job_id: int) -> str | None:
        """The trace context a traced put stored with the job; None if none (or no job)."""
        row = one(conn, self.Q["job_trace"], {"id": job_id})
        return None if row is None else row[0]

    def list_jobs(self, conn: Conn, tube: str, state: str, key: int, after: int,
                  limit: int) -> list[tuple[Any, ...]]:
        """A page of jobs in one state, after the row (key, after) in that state's order."""
        if state not in LIST_STATES:
            raise ValueError(f"state must be one of {', '.join(LIST_STATES)}, not {state!r}")
        params = {"tube": tube, "key": key, "after": after, "limit": limit}
        return [tuple(r) for r in conn.execute(self.Q[f"list_{state}_jobs"], params)]

    def search_jobs(self, conn: Conn, tube: str, text: str, min_id: int,
                    limit: int) -> list[tuple[Any, ...]]:
        """Jobs of tube above min_id whose id, unique key or body contains text."""
        params = {"tube": tube, "text": text, "bytes": text.encode(), "min_id": min_id,
                  "limit": limit}
        return [tuple(r) for r in conn.execute(self.Q["search_jobs"], params)]

    def unique_job_id(self, conn: Conn, tube: str, unique_key: str) -> int | None:
        """The live job holding ``unique_key`` in ``tube``, if any."""
        row = one(conn, self.Q["find_unique_job"], {"tube": tube, "unique_key": unique_key})
        return None if row is None else int(row[0])

    def owner_reservations(self, conn: Conn, now: int) -> list[tuple[Any, ...]]:
        """(owner or None, jobs held, earliest reservation start, tubes) per owner."""
        return [tuple(r) for r in conn.execute(self.Q["owner_reservations"], {"now": now})]

    def list_periodic(self, conn: Conn) -> list[tuple[str, int, int]]:
        return [(r[0], r[1], r[2]) for r in conn.execute(self.Q["list_periodic"])]

    def event_counters(self, conn: Conn) -> dict[str, tuple[int, int, int]]:
        """tube -> (buries, kicks, timeouts) since the database was created."""
        return {r[0]: (r[1], r[2], r[3]) for r in conn.execute(self.Q["event_counters"])}

    def add_durations(self, conn: Conn, rows: Sequence[tuple[str, str, str, int, float]]
                      ) -> None:
        """Add a worker's observed waits and runs, (tube, metric, le, count, sum) per
        bucket, to the histograms' rows (sqlq/histograms.py)."""
        conn.cursor().executemany(self.Q["add_durations"], [
            {"tube": tube, "metric": metric, "le": le, "count": count, "sum": total}
            for tube, metric, le, count, total in rows])

    def durations(self, conn: Conn) -> list[tuple[str, str, str, int, float]]:
        """Every histogram bucket: (tube, metric, le, count, sum), not cumulated."""
        return [(r[0], r[1], r[2], int(r[3]), float(r[4]))
                for r in conn.execute(self.Q["durations"])]

    # -- failed jobs by error (sqlq/failures.py) ----------------------------------------------

    def failed_groups(self, conn: Conn, depth: int, reason_chars: int
                      ) -> list[tuple[str, str, str, int, int, str]]:
        """(error, location, reason, jobs, newest id, tubes) of the newest ``depth`` buried
        jobs by how they failed (the reason's first ``reason_chars`` characters)."""
        return [(str(r[0]), str(r[1]), str(r[2]), int(r[3]), int(r[4]), str(r[5]))
                for r in conn.execute(self.Q["failed_groups"],
                                      {"depth": depth, "reason_chars": reason_chars})]

    def failed_group_ids(self, conn: Conn, depth: int, reason_chars: int, error: str,
                         location: str, reason: str) -> list[tuple[int, str]]:
        """(id, tube) of the buried jobs of one group, oldest first."""
        return [(int(r[0]), str(r[1])) for r in conn.execute(
            self.Q["failed_group_ids"], {"depth": depth, "reason_chars": reason_chars,
                                         "error": error, "location": location,
                                         "reason": reason})]

    # -- the workers registry and throughput history (registry.py, throughput.py) -----------

    def beat_worker(self, conn: Conn, params: dict[str, Any]) -> None:
        """Write a worker's row (``registry.Presence.params()``), whether or not it has one."""
        conn.execute(self.Q["beat_worker"], params)

    def forget_worker(self, conn: Conn, token: str) -> None:
        conn.execute(self.Q["forget_worker"], {"token": token})

    def list_workers(self, conn: Conn) -> list[tuple[Any, ...]]:
        """Every registered worker's row, the oldest first (rows of ``list_workers``)."""
        return [tuple(r) for r in conn.execute(self.Q["list_workers"])]

    def throughput_sampled(self, conn: Conn, minute: int) -> bool:
        return one(conn, self.Q["throughput_sampled"], {"minute": minute}) is not None

    def add_throughput(self, conn: Conn, params: dict[str, int], oldest: int) -> None:
        """Add a minute's sample (unless one was taken) and delete those before ``oldest``."""
        conn.execute(self.Q["add_throughput"], params)
        conn.execute(self.Q["trim_throughput"], {"oldest": oldest})

    def list_throughput(self, conn: Conn, since: int) -> list[tuple[int, int, int, int, int]]:
        """(minute, at, puts, deletes, buries) of the samples from minute ``since`` on."""
        return [(int(r[0]), int(r[1]), int(r[2]), int(r[3]), int(r[4]))
                for r in conn.execute(self.Q["list_throughput"], {"since": since})]

    # -- failed attempts (sqlq/attempts.py) --------------------------------------------------

    def keep_attempt(self, conn: Conn, params: dict[str, Any], kept: int) -> None:
        """Store one failed attempt (``Attempt.params()``) of a job that was released,
        buried or reserved again (nothing for a job gone), and keep only the job's last
        ``kept``: older rows are deleted once it has had more runs than that."""
        if "count_failure" in self.Q:  # PostgreSQL counts it in insert_attempt
            conn.execute(self.Q["count_failure"], {"job_id": params["job_id"]})
        conn.execute(self.Q["insert_attempt"], params)
        if params["attempt"] > kept:
            conn.execute(self.Q["trim_attempts"], {"job_id": params["job_id"],
                                                   "attempt": params["attempt"], "kept": kept})

    def attempts(self, conn: Conn, job_id: int) -> list[tuple[Any, ...]]:
        """The job's kept attempts, oldest first (rows of ``list_attempts``)."""
        return [tuple(r) for r in conn.execute(self.Q["list_attempts"], {"job_id": job_id})]

    def last_attempt(self, conn: Conn, job_id: int) -> tuple[int, str, str, str] | None:
        """(failed runs counted, error, message, traceback of the newest kept attempt, ''
        for each if none) of the job, or None if there is no such job."""
        row = one(conn, self.Q["last_attempt"], {"job_id": job_id})
        if row is None:
            return None
        return int(row[0]), row[1] or "", row[2] or "", row[3] or ""

    def attempt_trace(self, conn: Conn, job_id: int) -> str | None:
        """The traceparent of the job's latest failed run that kept one, or None."""
        row = one(conn, self.Q["attempt_trace"], {"job_id": job_id})
        return None if row is None else str(row[0])
