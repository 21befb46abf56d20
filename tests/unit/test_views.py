"""The read verbs (sqlq/verbs/views.py, ``q.views``): each a READ record and one storage
call; the Queue keeps the reads docs/spec.md names, calling the same verbs."""

from __future__ import annotations

import sqlq
from sqlq.verbs import READS
from sqlq.verbs.dispatch import READ
from tests.timing import FakeClock

#: The reads only tools make: on ``q.views`` alone.
TOOLS_ONLY = ("overview", "tube_summary", "search", "periodic_slots", "kept_result",
              "duration_histograms")
#: Names that went with the public surface by audience (issue 35).
REMOVED = ("try_reserve", "next_wakeup", "has_ready", "notifier", "jobs")
#: The reads docs/spec.md names on the Queue that are views too: both have them.
SPEC_READS = ("peek", "tubes", "stats", "stats_tube", "stats_job", "links", "job_page",
              "failed_groups", "failed_group_jobs", "workers", "job_trace", "horizon")


def test_every_read_is_a_read_record_without_a_span() -> None:
    names = [verb.name for verb in READS]
    assert len(names) == len(set(names))
    assert all(verb.tx == READ and verb.op is None and not verb.span for verb in READS)


def test_the_queue_keeps_the_spec_reads_and_tools_read_through_views(db_path: str) -> None:
    with sqlq.Queue(db_path) as q:
        assert [name for name in TOOLS_ONLY + REMOVED if hasattr(q, name)] == []
        assert [name for name in TOOLS_ONLY + SPEC_READS if not hasattr(q.views, name)] == []
        assert [name for name in SPEC_READS if not hasattr(q, name)] == []


def test_the_queue_reads_and_its_views_agree(fq: sqlq.Queue, clock: FakeClock) -> None:
    jid = fq.put(b"x", tube="t", delay=5)
    fq.pause_tube("t", 30)
    clock.advance(1)
    assert fq.stats_tube("t") == fq.views.stats_tube("t")
    assert fq.stats_job(jid) == fq.views.stats_job(jid)
    assert fq.tubes() == fq.views.tubes() == ["default", "t"]
    assert fq.job_page("t", "delayed") == fq.views.job_page("t", "delayed")
    assert fq.views.next_change() == clock.now + 4_000  # the delayed job comes due first


def test_every_view_answers_while_another_queue_holds_the_write_lock(db_path: str) -> None:
    """Reads never take the write lock: a dashboard left open never waits for (or
    holds up) a writer. A write here would raise Locked after 20 ms."""
    with sqlq.Queue(db_path) as q, sqlq.Queue(db_path) as other:
        jid = q.put(b"x", tube="t")
        q.lock_wait = 0.02
        views = q.views
        with other.transaction() as tx:
            tx.put(b"held", tube="t")  # the write lock, held until the block ends
            assert other.backend.in_transaction()
            assert views.overview().tubes[-1].ready == 1  # the uncommitted put unseen
            assert views.tube_summary("t").ready == 1
            assert [j.id for j in views.job_page("t", "ready")] == [jid]
            assert [j.id for j in views.search("t", "x")] == [jid]
            assert views.workers() == [] and views.periodic_slots() == []
            assert views.kept_result(jid) is None and views.job_trace(jid) is None
            assert views.duration_histograms() == [] and views.failed_groups() == []
            assert views.failed_group_jobs("", "") == []
            assert views.stats()["current-jobs-ready"] == 1
            assert views.stats_tube("t")["current-jobs-ready"] == 1
            assert views.stats_job(jid)["state"] == "ready"
            assert views.tubes() == ["default", "t"] and views.links(jid) == ([], [])
            peeked = views.peek(jid)
            assert peeked is not None and peeked.id == jid
            assert views.peek_state("ready", "t").id == jid  # type: ignore[union-attr]
            assert views.next_change() is None and views.change_token() is not None
            assert views.tube_record("t")[0] == [1, 0, 0, 0, 0, 0]
            views.horizon()
