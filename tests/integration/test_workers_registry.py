"""The workers registry and the throughput history (issue 26), on both backends: every
running ``sqlq work`` process is listed and counted, idle or not; one that stops or is
SIGKILLed is not; the registry is written at most once per heartbeat; throughput is
sampled once a minute and kept for a day."""

from __future__ import annotations

import signal
import subprocess
import time
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

import sqlq
from sqlq import throughput
from sqlq.core import registry
from sqlq.work.presence import SHOW_AFTER, Presence
from tests.conftest import FakeClock
from tests.dashboard_client import running
from tests.servers import require
from tests.timing import soon
from tests.workers import Work, lines, wait_for


def _rows(q: sqlq.Queue) -> list[tuple[object, ...]]:
    backend = q.backend
    return backend.read(backend.store.workers.list_workers)


def _seen(q: sqlq.Queue) -> tuple[float, str]:
    """What the dashboard shows: ``sqlq_workers`` in /metrics, and the Workers page."""
    with running(q) as client:
        text = client.get("/metrics").text
        page = client.get("/workers").text
    (family,) = [f for f in text_string_to_metric_families(text) if f.name == "sqlq_workers"]
    return family.samples[0].value, page


def _metric_workers(q: sqlq.Queue) -> float:
    return _seen(q)[0]


def test_a_worker_is_listed_idle_then_with_its_job_and_leaves_when_it_stops(
        q: sqlq.Queue) -> None:
    presence = Presence(q, ["b", "a"])
    presence.beat()
    (worker,) = q.workers()
    assert worker.registered and worker.alive and worker.jobs == 0
    assert (worker.tubes, worker.job_id, worker.jobs_done) == (["a", "b"], None, 0)
    assert worker.seen_at == worker.started_at and worker.since is None
    presence.started(41)
    presence.ended(41)
    presence.started(42)
    presence.beat_if_due()  # not due yet: nothing written, per job or otherwise
    assert q.workers()[0].job_id is None
    presence.beat()
    (worker,) = q.workers()
    assert (worker.job_id, worker.jobs_done) == (42, 1)
    # Holding a reservation too: one row, with its jobs held.
    q.put(b"x", tube="a")
    assert q.reserve("a", timeout=0) is not None
    (worker,) = q.workers()
    assert worker.registered and worker.jobs == 1 and worker.since is not None
    presence.stop()
    assert _rows(q) == []
    assert [w.registered for w in q.workers()] == [False]  # it still holds a job


def test_a_row_says_busy_a_second_into_a_job_and_idle_a_second_after_it(
        q: sqlq.Queue, monkeypatch: pytest.MonkeyPatch) -> None:
    """Between beats, the row is written only when it misstates what runs for SHOW_AFTER:
    a stream of short jobs writes nothing more; a long one, its start and its end."""
    now = [1000.0]
    monkeypatch.setattr("sqlq.work.presence.time", type("T", (), {
        "monotonic": staticmethod(lambda: now[0])}))
    presence = Presence(q, ["a"])
    presence.beat()
    seen = q.workers()[0].seen_at

    def shown() -> int | None:
        return q.workers()[0].job_id

    for job_id in range(1, 50):  # short jobs: in memory only
        presence.started(job_id)
        now[0] += SHOW_AFTER / 10
        presence.beat_if_due()
        presence.ended(job_id)
        presence.beat_if_due()
    assert (shown(), q.workers()[0].seen_at) == (None, seen)
    now[0] += registry.BEAT_S  # the beat: whatever runs then (here nothing)
    presence.beat_if_due()
    assert q.workers()[0].jobs_done == 49
    presence.started(50)
    now[0] += SHOW_AFTER * 0.9
    presence.beat_if_due()
    assert shown() is None
    now[0] += SHOW_AFTER * 0.2
    presence.beat_if_due()
    assert shown() == 50
    presence.beat_if_due()  # shown: nothing to write
    presence.ended(50)
    now[0] += SHOW_AFTER * 0.9
    presence.beat_if_due()
    assert shown() == 50
    now[0] += SHOW_AFTER * 0.2
    presence.beat_if_due()
    assert shown() is None
    presence.stop()


@pytest.mark.slow
def test_an_idle_sqlq_work_is_counted_and_a_killed_one_is_not(db_url: str,
                                                              q: sqlq.Queue) -> None:
    with Work(db_url, "--in-process", "--tube", "quiet", "--", "true") as idle, \
            Work(db_url, "--in-process", "--tube", "quiet", "--", "true") as doomed:
        pids = {idle.pid, doomed.pid}
        wait_for(lambda: {w.pid for w in q.workers() if w.registered} == pids,
                 what="both idle workers registered")
        assert all(w.jobs == 0 and w.job_id is None and w.tubes == ["quiet"]
                   for w in q.workers())
        count, page = _seen(q)
        assert count == 2
        assert f'data-pid="{idle.pid}" data-registered' in page and "idle</span>" in page
        doomed.signal(signal.SIGKILL)
        doomed.wait()
        # Gone once its owner registration ends: at once on SQLite (the kernel unlocks its
        # file), as soon as the server sees its connection closed on PostgreSQL.
        wait_for(lambda: [w.pid for w in q.workers()] == [idle.pid], 5,
                 "the killed worker gone from the list")
        count, page = _seen(q)
        assert count == 1 and f'data-pid="{doomed.pid}"' not in page
        assert idle.stop() == 0
        assert q.workers() == []
        assert _metric_workers(q) == 0
        # The stopped worker deleted its row; the killed one's stays until a worker sweeps.
        assert len(_rows(q)) == 1
        q.operations.sweep_workers()
        assert _rows(q) == []


def test_a_worker_registered_by_a_process_that_died_is_swept(db_url: str,
                                                             q: sqlq.Queue) -> None:
    """A row whose owner token was never alive (or is gone) neither shows nor counts."""
    q.operations.beat_worker({
        "token": "999999-deadbeef0000", "host": "elsewhere", "pid": 999999, "tubes": "t",
        "started_at": 1, "seen_at": 1, "job_id": None, "jobs_done": 0})
    assert q.workers() == []
    assert q.operations.sweep_workers() == 1 and _rows(q) == []


def test_throughput_is_sampled_once_a_minute_and_kept_a_day(fq: sqlq.Queue,
                                                            clock: FakeClock) -> None:
    backend = fq.backend
    assert fq.operations.sample_throughput(clock())
    assert not fq.operations.sample_throughput(clock())  # one sample a minute
    fq.put_many([b"x"] * 6)
    for _ in range(2):
        job = fq.reserve(timeout=0)
        assert job is not None
        job.delete()
    job = fq.reserve(timeout=0)
    assert job is not None
    job.bury()
    clock.advance(120)  # two minutes: the rates are per minute
    assert fq.operations.sample_throughput(clock())
    (minute,) = fq.throughput()
    assert (minute.puts, minute.deletes, minute.buries) == (3.0, 1.0, 0.5)
    assert minute.at == clock()
    for _ in range(throughput.KEEP_MINUTES + 5):
        clock.advance(60)
        fq.operations.sample_throughput(clock())
    rows = backend.read(lambda c: backend.store.history.list_throughput(c, 0))
    assert len(rows) == throughput.KEEP_MINUTES + 1  # bounded: a day of minutes
    assert len(fq.throughput()) == throughput.KEEP_MINUTES
    assert len(fq.throughput(minutes=10)) == 10


@pytest.mark.slow
def test_an_async_worker_registers_and_counts_its_runs(q: sqlq.Queue, db_url: str) -> None:
    from tests import ajobs

    message = ajobs.square.message(7)
    jid = q.put(message, tube=ajobs.square.tube, ttr=ajobs.square.ttr)
    with Work(db_url, "--in-process", "--import", "tests.ajobs", "--concurrency", "2") as w:
        # Its runs are written with its next heartbeat (at most 5 s later), not per job.
        wait_for(lambda: [(x.pid, x.jobs_done, "async" in x.tubes) for x in q.workers()]
                 == [(w.pid, 1, True)], what="the async worker's row, one run done")
        assert q.result(jid, timeout=0) == b"49"
        assert w.stop() == 0, w.text()
    assert _rows(q) == []


@pytest.mark.slow
def test_busy_workers_say_which_job_they_run_and_keep_their_heartbeat_fresh(
        db_url: str, q: sqlq.Queue, tmp_path: Path) -> None:
    """Web check F-1: a worker 60 s into a job read "idle", its heartbeat as old as the job.
    Every kind of worker (a task in the main thread, a command, the async loop, each child
    of --processes 2) names its job within about a second of its start and beats every
    5 s while it runs; /metrics and the page count them busy."""
    from tests import ajobs, jobs

    started = tmp_path / "started"
    long = 60.0
    put = {  # the job of each worker, by tube
        "slow": q.put(jobs.nap.message(str(started), long), tube="slow", ttr=120),
        "async": q.put(ajobs.nap.message(str(started), long), tube="async", ttr=120),
        "cmd": q.put(b"", tube="cmd", ttr=120),
        "many": q.put(jobs.nap.message(str(started), long), tube="many", ttr=120),
    }
    many = q.put(jobs.nap.message(str(started), long), tube="many", ttr=120)
    with Work(db_url, "--in-process", "--import", "tests.jobs", "--tube", "slow") as sync, \
            Work(db_url, "--in-process", "--import", "tests.ajobs", "--tube", "async") as aio, \
            Work(db_url, "--in-process", "--tube", "cmd", "--", "sh", "-c",
                 f"echo start $$ >> {started}; sleep {long}") as cmd, \
            Work(db_url, "--import", "tests.jobs", "--tube", "many", "--processes", "2",
                 "--prefetch", "1"):
        wait_for(lambda: len(lines(started)) == 5, what="the five jobs started")
        first_start = time.monotonic()
        # Named within a second or two of their start (SHOW_AFTER), not at the next beat.
        expected = {put["slow"], put["async"], put["cmd"], put["many"], many}
        rows = wait_for(lambda: (lambda ws: ws if {w.job_id for w in ws} == expected
                                 else None)(q.workers()),
                        what="every worker's row naming its job")
        assert time.monotonic() - first_start < soon(SHOW_AFTER + 1)
        by_pid = {w.pid: w for w in rows}
        assert by_pid[sync.pid].job_id == put["slow"]
        assert by_pid[aio.pid].job_id == put["async"]
        assert by_pid[cmd.pid].job_id == put["cmd"]
        assert len(rows) == 5 and all(w.busy and w.registered and w.jobs == 1 for w in rows)
        count, page = _seen(q)
        assert count == 5
        assert '<b data-field="busy">5</b> busy' in page
        assert f'<a href="/job?id={put["slow"]}">#{put["slow"]}</a>' in page
        with running(q) as client:
            text = client.get("/metrics").text
        samples = {s.name: s.value for f in text_string_to_metric_families(text)
                   for s in f.samples}
        assert samples["sqlq_workers_busy"] == 5
        check = subprocess.run([require("promtool", "prometheus"), "check", "metrics"],
                               input=text, text=True, capture_output=True, timeout=60)
        assert check.returncode == 0, check.stdout + check.stderr
        # The heartbeat goes on while the jobs run: each row is rewritten every BEAT_S.
        seen = {w.pid: w.seen_at for w in rows}
        wait_for(lambda: all(w.seen_at is not None and w.seen_at > (seen[w.pid] or 0)
                             and w.job_id is not None for w in q.workers()),
                 registry.BEAT_S + soon(1), "a second heartbeat of every busy worker")
