"""The read-only views behind the dashboard and /metrics (sqlq/observe.py)."""

from __future__ import annotations

import pytest

import sqlq
from tests.timing import FakeClock

pytestmark = pytest.mark.both_apis  # q and fq: as a Queue, then as an AsyncQueue


def test_overview_agrees_with_stats(fq: sqlq.Queue, clock: FakeClock) -> None:
    for i in range(6):
        fq.put(f"job {i}", tube="mail", priority=1000 if i < 2 else 2000)
    fq.put("later", tube="mail", delay=30)
    fq.put("soon", tube="mail", delay=5)
    fq.reserve("mail", timeout=0)
    fq.reserve("mail", timeout=0).bury(reason="broken")  # type: ignore[union-attr]
    fq.subscribe("orders", "billing")
    fq.pause_tube("mail", 60)
    clock.advance(10)  # "soon" is due: it counts as ready
    overview = fq.views.overview()
    names = [t.name for t in overview.tubes]
    assert names == ["billing", "default", "mail"]
    mail = overview.tubes[2]
    stats = fq.stats_tube("mail")
    assert (mail.ready, mail.urgent, mail.reserved, mail.delayed, mail.buried) == (
        stats["current-jobs-ready"], stats["current-jobs-urgent"],
        stats["current-jobs-reserved"], stats["current-jobs-delayed"],
        stats["current-jobs-buried"])
    assert (mail.ready, mail.reserved, mail.delayed, mail.buried) == (5, 1, 1, 1)
    assert mail.paused_until == clock.now + 50_000
    assert mail.oldest_ready_at == clock.now - 10_000
    assert overview.puts_total == 8 and overview.deletes_total == 0
    assert mail.buries_total == 1


def test_timeouts_are_counted(fq: sqlq.Queue, clock: FakeClock) -> None:
    fq.put("x", ttr=1)
    fq.reserve(timeout=0, detach=True)
    clock.advance(2)
    assert fq.reserve(timeout=0) is not None  # the expired reservation was promoted
    assert fq.views.tube_summary("default").timeouts_total == 1


def test_pages_follow_each_state_order(q: sqlq.Queue) -> None:
    ids = [q.put(f"p{p}", tube="t", priority=p) for p in (5, 1, 3, 1)]
    seen = []
    after = None
    while page := q.job_page("t", "ready", after=after, limit=1):
        seen.append(page[0].id)
        after = page[-1].cursor
    assert seen == [ids[1], ids[3], ids[2], ids[0]]
    for _ in range(2):
        q.reserve("t", timeout=0).bury()  # type: ignore[union-attr]
    buried = q.job_page("t", "buried")
    assert [j.id for j in buried] == sorted([ids[1], ids[3]])
    assert q.job_page("t", "buried", after=buried[0].cursor)[0].id == buried[1].id


def test_search_by_body_key_and_id(q: sqlq.Queue) -> None:
    q.put("nothing here", tube="t")
    wanted = q.put(b"invoice 42 \xff", tube="t", unique_key="order-7")
    assert [j.id for j in q.views.search("t", "invoice")] == [wanted]
    assert [j.id for j in q.views.search("t", "order-7")] == [wanted]
    assert [j.id for j in q.views.search("t", str(wanted))] == [wanted]
    assert q.views.search("other", "invoice") == []


def test_workers_are_the_processes_holding_reservations(q: sqlq.Queue) -> None:
    q.put("a", tube="t")
    q.put("b", tube="u")
    q.reserve(["t", "u"], timeout=0)
    q.reserve(["t", "u"], timeout=0)
    (worker,) = q.workers()
    assert worker.jobs == 2 and worker.tubes == ["t", "u"] and worker.alive
    import os
    assert worker.pid == os.getpid()


def test_kept_result(q: sqlq.Queue) -> None:
    q.put("a")
    job = q.reserve(timeout=0)
    assert job is not None and q.views.kept_result(job.id) is None
    job.complete(b"42")
    assert q.views.kept_result(job.id) == b"42"


def test_exact_id_and_key_are_found_at_any_age(q: sqlq.Queue, monkeypatch: object) -> None:
    from sqlq import observe

    old = q.put("old", tube="t", unique_key="order-1")
    q.put_many(["filler"] * 20, tube="t")
    monkeypatch.setattr(observe, "SEARCH_DEPTH", 5)  # type: ignore[attr-defined]
    assert [j.id for j in q.views.search("t", "old")] == []  # body text: recent jobs only
    assert [j.id for j in q.views.search("t", str(old))] == [old]
    assert [j.id for j in q.views.search("t", "order-1")] == [old]
    assert q.views.search("u", str(old)) == []  # another tube's job
