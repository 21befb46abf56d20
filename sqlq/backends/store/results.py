"""Results kept after a job completes, and topics (a publish fills every subscribed tube)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..sql import one

if TYPE_CHECKING:
    from ..conn import Conn
    from .jobs import JobStore

#: Expired results purged per complete(): more than one, so purging outpaces expiry.
PURGE_BATCH = 64


class ResultStore:
    """Results; ``jobs`` deletes the job whose result is kept."""

    def __init__(self, Q: dict[str, str], jobs: JobStore[Any]) -> None:
        self.Q = Q
        self.jobs = jobs

    def complete(self, conn: Conn, now: int, job_id: int, lease: int | None, result: bytes,
                 ttl_ms: int) -> str:
        """Delete the job (as ``JobStore.delete``) and keep its result ``ttl_ms``;
        return its tube. A few expired results are purged on the way, so the table stays
        bounded without a reaper and without touching the claim path."""
        tube = self.jobs.delete(conn, now, job_id, lease)
        conn.execute(self.Q["insert_result"],
                     {"id": job_id, "result": result, "expires_at": now + ttl_ms})
        conn.execute(self.Q["purge_results"], {"now": now, "limit": PURGE_BATCH})
        return tube

    def purge(self, conn: Conn, now: int, limit: int) -> int:
        """Delete up to ``limit`` expired results (the prune's, for a queue where nothing
        completes to purge them); how many."""
        return len(conn.execute(self.Q["purge_results"], {"now": now, "limit": limit})
                   .fetchall())

    def result_outcome(self, conn: Conn, now: int, job_id: int
                       ) -> tuple[bytes | None, int | None, str | None]:
        """(result, job state, bury reason): the result if kept, else what the job is,
        else Nones."""
        row = one(conn, self.Q["result_outcome"], {"id": job_id, "now": now})
        result = None if row[0] is None else bytes(row[0])
        return result, row[1], row[2]

    def look(self, conn: Conn, now: int, job_id: int
             ) -> tuple[tuple[bytes | None, int | None, str | None], int]:
        """(:meth:`result_outcome`, the ids issued so far: ``job_id`` itself when it is
        known), from one snapshot: what ``Queue.result`` decides from (sqlq/results.py)."""
        outcome = self.result_outcome(conn, now, job_id)
        issued = self.jobs.total_jobs(conn) if outcome == (None, None, None) else job_id
        return outcome, issued


class TopicStore:
    """Subscriptions of tubes to topics: ``publish`` puts one copy of a job into every
    tube subscribed to its topic (``Store.publish``). Subscriptions are rows, not live
    connections, so fan-out is pull: a subscriber that was down finds every message
    waiting in its tube. Topic names follow the tube-name rules."""

    def __init__(self, Q: dict[str, str]) -> None:
        self.Q = Q

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
