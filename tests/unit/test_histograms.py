"""``sqlq_job_wait_seconds`` and ``sqlq_job_run_seconds``: what real ``sqlq work`` processes
observed, read back through ``/metrics`` with prometheus-client's own parser.

Every test starts worker processes and reads the dashboard's ``/metrics`` over HTTP,
on both backends. Bounds are generous (a busy two-core machine): a bucket check only
says that a value fell on the right side of a bound far from what it measures.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

import sqlq
from sqlq.histograms import BUCKETS, Tally
from tests.dashboard_client import running

pytestmark = pytest.mark.timeout(90)

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def scrape(q: sqlq.Queue) -> tuple[Samples, dict[str, str]]:
    """Every sample of /metrics by (name, labels), and each family's type."""
    with running(q) as client:
        reply = client.get("/metrics")
    assert reply.status == 200
    families = list(text_string_to_metric_families(reply.text))
    samples = {(s.name, tuple(sorted(s.labels.items()))): s.value
               for f in families for s in f.samples}
    return samples, {f.name: f.type for f in families}


def count(samples: Samples, metric: str, tube: str) -> float:
    return samples.get((f"sqlq_job_{metric}_seconds_count", (("tube", tube),)), 0)


def test_no_histogram_without_workers(q: sqlq.Queue) -> None:
    job = q.put(b"by hand")
    q.reserve(timeout=0).delete()  # type: ignore[union-attr]
    samples, types = scrape(q)
    assert types["sqlq_job_wait_seconds"] == "histogram"
    assert count(samples, "wait", "default") == 0 and count(samples, "run", "default") == 0
    assert q.peek(job) is None


def test_recorded_tallies_add_up_across_queues(db_url: str) -> None:
    """Two processes' flushes meet in the same rows (here two Queues: the SQL is the same)."""
    first, second = sqlq.Queue(db_url), sqlq.Queue(db_url)
    try:
        for queue, seconds in ((first, 0.003), (second, 0.2), (first, 7200.0)):
            tally = Tally()
            tally.observe("t", "run", seconds)
            queue.record_durations(tally)
        histograms = {(h.tube, h.metric): h for h in first.views.duration_histograms()}
        h = histograms["t", "run"]
        assert h.count == 3 and h.sum == pytest.approx(7200.203)
        cumulated = dict(h.buckets)
        assert cumulated["0.005"] == 1 and cumulated["0.25"] == 2
        assert cumulated["3600.0"] == 2 and cumulated["+Inf"] == 3
        assert len(h.buckets) == len(BUCKETS)
    finally:
        first.close()
        second.close()


def test_waits_count_from_the_due_time_on_the_first_reservation_only(fq: sqlq.Queue,
                                                                      clock: Any) -> None:
    tally = Tally()
    fq.put(b"delayed", tube="d", delay=10)
    clock.advance(12)
    job = fq.reserve("d", timeout=0)
    assert job is not None and job.delay == 10
    tally.reserved(job)  # ready at put + 10 s, reserved 2 s later
    job.release()
    again = fq.reserve("d", timeout=0)
    assert again is not None
    tally.reserved(again)  # a second reservation: when it became ready again is not kept
    kicked = fq.put(b"kicked", tube="k", delay=60)
    fq.kick_job(kicked)
    clock.advance(1)
    job = fq.reserve("k", timeout=0)
    assert job is not None
    tally.reserved(job)  # became ready when kicked: not kept either
    fq.put(b"plain", tube="p")
    clock.advance(0.5)
    job = fq.reserve("p", timeout=0)
    assert job is not None
    tally.reserved(job)
    fq.record_durations(tally)
    found = {(h.tube, h.metric): (h.count, h.sum) for h in fq.views.duration_histograms()}
    assert found == {("d", "wait"): (1, 2.0), ("p", "wait"): (1, 0.5)}


def test_the_overview_shows_median_and_p95_bounds(q: sqlq.Queue) -> None:
    q.put(b"x", tube="mail")
    tally = Tally()
    for seconds in (0.02,) * 9 + (4.0,):
        tally.observe("mail", "run", seconds)
    q.record_durations(tally)
    with running(q) as client:
        page = client.get("/").text
    row = page[page.index('data-tube="mail"'):]
    row = row[:row.index("</tr>")]
    assert 'data-field="run">≤ 25ms · ≤ 5s<' in row
    assert 'data-field="wait">—<' in row
    with running(q) as client:
        polled = json.loads(client.get("/api/overview").text)["tubes"]["mail"]
    assert polled["run"] == "≤ 25ms · ≤ 5s" and polled["wait"] == "—"


@pytest.mark.sqlite_only  # a closed Queue on PostgreSQL connects again: nothing fails
def test_a_failed_flush_keeps_its_observations_for_the_next(db_url: str,
                                                             caplog: Any) -> None:
    from sqlq.work.recorder import Recorder

    closed = sqlq.Queue(db_url)
    closed.close()
    recorder = Recorder(closed, every=0)
    recorder.tally.observe("t", "run", 0.1)
    recorder.flush_if_due()  # the database cannot be reached: logged, kept
    assert "could not record wait and run times" in caplog.text and recorder.tally
    with sqlq.Queue(db_url) as q:
        recorder.queue = q
        recorder.flush()
        recorder.flush()  # nothing twice
        assert [(h.tube, h.count) for h in q.views.duration_histograms()] == [("t", 1)]
