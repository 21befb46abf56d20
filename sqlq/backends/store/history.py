"""The records kept beside the queue for people: failed attempts (attempts.py), run and
wait histograms (histograms.py), failed jobs grouped by error (failures.py), the
throughput history (throughput.py) and periodic tasks' slots (periodic.py)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ..sql import one

if TYPE_CHECKING:
    from ..conn import Conn


class HistoryStore:
    """What happened to jobs, kept after the fact."""

    def __init__(self, Q: dict[str, str]) -> None:
        self.Q = Q

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

    # -- histograms (sqlq/histograms.py) -----------------------------------------------------

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

    # -- throughput history (sqlq/throughput.py) ---------------------------------------------

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

    # -- periodic tasks ----------------------------------------------------------------------

    def claim_periodic_slot(self, conn: Conn, now: int, name: str, slot: int) -> bool:
        """True if ``slot`` is later than the last slot recorded for periodic task ``name``
        (and is now recorded): the caller, and nobody else, puts the slot's job."""
        params = {"name": name, "slot": slot, "now": now}
        return one(conn, self.Q["claim_periodic_slot"], params) is not None

    def list_periodic(self, conn: Conn) -> list[tuple[str, int, int]]:
        return [(r[0], r[1], r[2]) for r in conn.execute(self.Q["list_periodic"])]
