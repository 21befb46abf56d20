"""``sqlq work --import``: real worker processes running the task functions of tests/jobs.py.

Every test here starts ``python -m sqlq work`` as a separate process and watches
the database and the log from outside, as an operator would. Timing is asserted
generously: the machine running the tests is busy.
"""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path
from typing import Any

import pytest

import sqlq
from tests import jobs
from tests.workers import Work, alive, children, lines, wait_for

pytestmark = pytest.mark.timeout(60)


def enqueue(q: sqlq.Queue, task: Any, *args: Any, **kwargs: Any) -> int:
    """Put a call of ``task`` into ``q`` as its decorator says (tube, priority, ttr)."""
    return q.put(task.message(*args, **kwargs), tube=task.tube, priority=task.priority,
                 ttr=task.ttr)


def test_success_stores_results_and_logs_one_json_line_per_job(q: sqlq.Queue,
                                                                 db_url: str) -> None:
    added = enqueue(q, jobs.add, 2, 3)
    nothing = enqueue(q, jobs.noop)
    with Work(db_url, "--import", "tests.jobs", "--burst", "--log-format", "json") as w:
        assert w.wait() == 0, w.text()
    assert q.result(added, timeout=0) == b"5"
    assert q.peek(nothing) is None  # deleted: no result is stored for None
    assert q.stats()["current-jobs-ready"] == 0
    done = [r for r in w.records() if r.get("outcome") == "done"]
    assert sorted(r["job"] for r in done) == [added, nothing]
    for record in done:
        assert record["tube"] == "default"
        assert record["task"] in ("tests.jobs.add", "tests.jobs.noop")
        assert record["duration_ms"] >= 0 and record["attempt"] == 1
        assert record["level"] == "info"


@pytest.mark.slow
def test_failure_is_retried_with_backoff_then_buried_with_the_last_line(
        q: sqlq.Queue, db_url: str, tmp_path: Path) -> None:
    attempts = tmp_path / "attempts"
    failing = enqueue(q, jobs.fail, str(attempts), "bad input 42")
    flaky_log = tmp_path / "flaky"
    flaky = enqueue(q, jobs.flaky, str(flaky_log), 2)
    with Work(db_url, "--import", "tests.jobs") as w:
        wait_for(lambda: (j := q.peek(failing)) and j.state == "buried", what="a burial")
        wait_for(lambda: q.peek(flaky) is None, what="flaky to succeed")
        assert w.stop() == 0
    job = q.peek(failing)
    assert job is not None
    assert job.bury_reason == "ValueError: bad input 42"
    assert job.reserves == 3 and job.releases == 2  # retries=2: three runs
    assert len(lines(attempts)) == 3
    assert q.result(flaky, timeout=0) == json.dumps("ok after 3 runs").encode()
    log = w.text()
    assert log.count("retry in") == 4  # two for each job
    assert f"job {failing} tests.jobs.fail buried after 3 attempts: ValueError" in log


def test_unknown_task_and_bad_bodies_are_buried_with_the_reason(q: sqlq.Queue,
                                                                db_url: str) -> None:
    unknown = q.put(json.dumps({"task": "nobody.knows", "args": []}))
    garbage = q.put(b"\xff not json")
    bad_args = q.put(json.dumps({"task": "tests.jobs.add", "args": [1]}))
    with Work(db_url, "--import", "tests.jobs", "--burst") as w:
        assert w.wait() == 0, w.text()
    reasons = {jid: q.peek(jid).bury_reason for jid in (unknown, garbage, bad_args)}  # type: ignore[union-attr]
    assert "unknown task 'nobody.knows'" in str(reasons[unknown])
    assert "not JSON" in str(reasons[garbage])
    assert "bad arguments" in str(reasons[bad_args]) and "'b'" in str(reasons[bad_args])
    assert all(q.peek(j).reserves == 1 for j in reasons)  # type: ignore[union-attr]


@pytest.mark.slow
def test_the_supervisor_forks_its_workers_and_never_imports_a_task_module(
        q: sqlq.Queue, db_url: str, tmp_path: Path) -> None:
    """The workers are forked from the supervisor, which must hold nothing that may not
    cross a fork: a task module (which opens a Queue, or may start a thread, as it is
    imported) is imported by each worker, and by one child the supervisor checks it
    in, never by the supervisor. A SIGKILLed worker is forked again."""
    imported = tmp_path / "imported"
    (tmp_path / "pidtasks.py").write_text(
        "import os, sqlq\n"
        f"with open({str(imported)!r}, 'a') as f:\n"
        "    f.write(f'{os.getpid()} {os.getppid()}\\n')\n"
        f"q = sqlq.Queue({db_url!r})\n"
        "@q.task()\n"
        "def noop():\n"
        "    pass\n")
    with Work(db_url, "--import", "pidtasks", "--processes", "2", cwd=tmp_path) as w:
        w.wait_log("watching", count=2)
        workers = children(w.pid)
        assert len(workers) == 2, w.text()
        pids = [tuple(map(int, line.split())) for line in lines(imported)]
        assert len(pids) == 3 and all(parent == w.pid for _, parent in pids), (pids, w.pid)
        assert set(workers) < {pid for pid, _ in pids}  # the workers, and the check
        os.kill(workers[0], signal.SIGKILL)
        w.wait_log("watching", count=3)
        assert len(lines(imported)) == 4 and str(w.pid) not in \
            [line.split()[0] for line in lines(imported)]
        assert w.stop() == 0, w.text()


@pytest.mark.slow
def test_heartbeat_keeps_a_long_job_from_running_twice(q: sqlq.Queue, db_url: str,
                                                       tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    kept = enqueue(q, jobs.slow_alive, str(runs), 3.5)  # ttr=2, touched every 1.6 s
    with Work(db_url, "--import", "tests.jobs", "--processes", "2") as w:
        wait_for(lambda: q.peek(kept) is None, timeout=20, what="the long job to finish")
        assert w.stop() == 0
    starts = [line for line in lines(runs) if line.startswith("start")]
    assert len(starts) == 1, lines(runs)
    assert "touched" not in w.text()  # DEBUG only


@pytest.mark.slow
def test_without_keepalive_a_job_past_its_ttr_runs_again_then_is_buried(
        q: sqlq.Queue, db_url: str, tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    jid = enqueue(q, jobs.slow, str(runs), 2.0)  # ttr=1, no heartbeat, retries=1
    with Work(db_url, "--import", "tests.jobs", "--processes", "2") as w:
        wait_for(lambda: (j := q.peek(jid)) and j.state == "buried", timeout=20,
                 what="the job to be buried")
        assert w.stop() == 0
    job = q.peek(jid)
    assert job is not None and job.reserves == 3 and job.timeouts == 2
    assert "gave up after 2 runs that did not finish" in str(job.bury_reason)
    assert len([x for x in lines(runs) if x.startswith("start")]) == 2
    assert "past its TTR" in w.text() and "reservation was lost" in w.text()


@pytest.mark.slow
def test_a_run_past_its_ttr_whose_rerun_finished_first_is_logged_lost_not_a_crash(
        q: sqlq.Queue, db_url: str, tmp_path: Path) -> None:
    """Reliability F3: the rerun elsewhere deletes the job while the first run still
    works; the first worker's delete then finds no job. It logs "lost" and goes on: no
    worker exits, so the supervisor restarts none."""
    runs = tmp_path / "runs"
    jid = enqueue(q, jobs.overrun_once, str(runs), 2.5)  # ttr=1, no heartbeat
    with Work(db_url, "--import", "tests.jobs", "--processes", "2") as w:
        wait_for(lambda: q.peek(jid) is None, timeout=20, what="the rerun to delete the job")
        w.wait_log("reservation was lost", timeout=20)
        after = enqueue(q, jobs.record, str(tmp_path / "after"), "ok")
        wait_for(lambda: q.peek(after) is None, timeout=20, what="the workers to go on")
        assert w.stop() == 0, w.text()
    assert len([x for x in lines(runs) if x.startswith("end")]) == 2, lines(runs)
    assert "ended: exit status" not in w.text(), w.text()
    assert "not found" not in w.text(), w.text()


@pytest.mark.slow
def test_sigterm_lets_the_running_job_finish_and_exits_0(q: sqlq.Queue, db_url: str,
                                                         tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    running = q.put(jobs.nap.message(str(runs), 1.5), tube="slow", ttr=30)
    waiting = q.put(jobs.nap.message(str(runs), 0), tube="slow", ttr=30)
    with Work(db_url, "--import", "tests.jobs") as w:
        wait_for(lambda: lines(runs), what="the job to start")
        started = time.monotonic()
        assert w.stop() == 0, w.text()
        assert time.monotonic() - started < 10
    assert lines(runs)[-1].startswith("end")  # finished, not interrupted
    assert q.peek(running) is None
    waiting_job = q.peek(waiting)
    assert waiting_job is not None and waiting_job.state == "ready"  # never reserved
    assert waiting_job.reserves == 0


@pytest.mark.slow
def test_sigkill_of_a_child_reruns_its_job_once_and_the_child_is_restarted(
        q: sqlq.Queue, db_url: str, tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    jid = q.put(jobs.nap.message(str(runs), 1.0), tube="slow", ttr=60)
    with Work(db_url, "--import", "tests.jobs", "--processes", "2") as w:
        wait_for(lambda: len(children(w.pid)) == 2, what="two workers")
        first = wait_for(lambda: lines(runs), what="the job to start")
        victim = int(first[0].split()[1])
        assert victim in children(w.pid)
        os.kill(victim, signal.SIGKILL)
        # Its reservation comes back at once (not after the 60 s TTR): the other runs it.
        wait_for(lambda: q.peek(jid) is None, timeout=15, what="the job to run again")
        wait_for(lambda: len(children(w.pid)) == 2 and victim not in children(w.pid),
                 what="the supervisor to restart the child")
        w.wait_log("restarting it")
        assert w.stop() == 0
    starts = [line for line in lines(runs) if line.startswith("start")]
    ends = [line for line in lines(runs) if line.startswith("end")]
    assert len(starts) == 2 and len(ends) == 1, lines(runs)
    assert not alive(victim)


@pytest.mark.slow
def test_supervisor_sigterm_drains_every_child(q: sqlq.Queue, db_url: str,
                                               tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    ids = [q.put(jobs.nap.message(str(runs), 1.0), tube="slow", ttr=30)
           for _ in range(2)]
    with Work(db_url, "--import", "tests.jobs", "--processes", "2") as w:
        wait_for(lambda: len(lines(runs)) >= 2, what="both jobs to start")
        kids = children(w.pid)
        assert w.stop() == 0, w.text()
    assert all(q.peek(j) is None for j in ids)
    assert sorted(x.split()[0] for x in lines(runs)) == ["end", "end", "start", "start"]
    assert not any(alive(k) for k in kids)


def test_grace_period_releases_a_job_that_does_not_finish(q: sqlq.Queue, db_url: str,
                                                          tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    jid = q.put(jobs.nap.message(str(runs), 30), tube="slow", ttr=60)
    with Work(db_url, "--import", "tests.jobs", "--grace", "0.5") as w:
        wait_for(lambda: lines(runs), what="the job to start")
        started = time.monotonic()
        assert w.stop() == 0, w.text()
        assert time.monotonic() - started < 10
    job = q.peek(jid)
    assert job is not None and job.state == "ready" and job.reserves == 1
    assert "grace period ran out" in w.text()


def test_usage_errors_are_one_line(db_url: str) -> None:
    with Work(db_url) as w:
        assert w.wait() == 1
    assert "nothing to run" in w.text() and "Traceback" not in w.text()
    with Work(db_url, "--import", "tests.no_such_module") as w:
        assert w.wait() == 1
    assert "no_such_module" in w.text() and len(w.text().strip().splitlines()) == 1


@pytest.mark.slow
def test_a_worker_that_cannot_start_is_restarted_with_backoff_not_in_a_loop(
        db_url: str) -> None:
    with Work(db_url, "--import", "tests.crashy_jobs", "--processes", "2") as w:
        time.sleep(4)
        restarts = w.text().count("restarting it in")
        assert w.stop() == 0
    # Back-off 0.5, 1, 2 s per worker: at most a handful in 4 s, not hundreds.
    assert 2 <= restarts <= 10, w.text()
    assert "restarting it in 2.0s" in w.text() or "restarting it in 1.0s" in w.text()
