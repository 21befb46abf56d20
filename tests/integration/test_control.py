"""Cancel and timeouts under real ``sqlq work`` processes (issue 25): a COMMAND killed, an
``async def`` task cancelled, a plain function stopped at its next look, each within about
a second of ``q.cancel``; the job never runs again and the next job does."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

import sqlq
from tests import control_ajobs, control_jobs
from tests.timing import soon
from tests.workers import Work, alive, lines, wait_for

pytestmark = pytest.mark.timeout(60)
#: The tests that start a worker take seconds each.
slow = pytest.mark.slow


def enqueue(q: sqlq.Queue, task: Any, *args: Any) -> int:
    return q.put(task.message(*args), tube=task.tube, ttr=task.ttr)


def _cancel_soon(q: sqlq.Queue, jid: int, stopped: Any) -> None:
    """Cancel jid; ``stopped()`` comes true within about a second."""
    cancelled = time.monotonic()
    q.cancel(jid)
    wait_for(stopped, what="the run to stop")
    assert time.monotonic() - cancelled < soon(1.0)


def _then_the_next_job_runs(q: sqlq.Queue, w: Work, task: Any, out: Path, jid: int) -> None:
    """The worker goes on with the next job; the cancelled one never ran again."""
    enqueue(q, task, str(out), "next")
    wait_for(lambda: "next" in lines(out), what="the next job")
    assert sum(1 for line in lines(out) if line == f"start {jid}") == 1
    wait_for(lambda: q.stats()["current-jobs-reserved"] == 0, what="the next job's delete")
    assert q.peek(jid) is None
    w.signal()
    assert w.wait() == 0


@slow
def test_a_cancelled_command_is_killed(q: sqlq.Queue, db_url: str, tmp_path: Path) -> None:
    out = tmp_path / "out"
    script = f'read x; echo "$x $$" >> {out}; if [ "$x" = slow ]; then sleep 60; fi'
    w = Work(db_url, "--tube", "cmd", "--prefetch", "1", "--", "sh", "-c", script)
    jid = q.put(b"slow\n", tube="cmd")
    wait_for(lambda: lines(out), what="the command to start")
    pid = int(lines(out)[0].split()[1])
    _cancel_soon(q, jid, lambda: not alive(pid))
    w.wait_log("cancelled")
    q.put(b"next\n", tube="cmd")
    wait_for(lambda: len(lines(out)) == 2, what="the next job")
    assert [line.split()[0] for line in lines(out)] == ["slow", "next"]
    wait_for(lambda: q.stats()["current-jobs-reserved"] == 0, what="the next job's delete")
    w.signal()
    assert w.wait() == 0


@slow
@pytest.mark.parametrize("how", ["current", "touch"])
def test_a_plain_function_stops_at_its_next_look(q: sqlq.Queue, db_url: str, tmp_path: Path,
                                                 how: str) -> None:
    out = tmp_path / "out"
    w = Work(db_url, "--import", "tests.control_jobs", "--tube", "control")
    jid = enqueue(q, control_jobs.looks, str(out), how)
    wait_for(lambda: lines(out), what="the task to start")
    _cancel_soon(q, jid, lambda: any(line.startswith("stopped") for line in lines(out)))
    assert lines(out)[-1] == f"stopped {jid} JobCancelled"
    w.wait_log(f"job {jid}")
    _then_the_next_job_runs(q, w, control_jobs.note, out, jid)


@slow
def test_a_plain_function_in_the_async_worker_stops_at_its_next_look(
        q: sqlq.Queue, db_url: str, tmp_path: Path) -> None:
    out = tmp_path / "out"
    w = Work(db_url, "--import", "tests.control_jobs", "--tube", "control",
             "--concurrency", "2")
    jid = enqueue(q, control_jobs.looks, str(out), "current")
    wait_for(lambda: lines(out), what="the task to start")
    _cancel_soon(q, jid, lambda: any(line.startswith("stopped") for line in lines(out)))
    _then_the_next_job_runs(q, w, control_jobs.note, out, jid)


@slow
def test_a_cancelled_async_task_is_cancelled(q: sqlq.Queue, db_url: str,
                                            tmp_path: Path) -> None:
    out = tmp_path / "out"
    w = Work(db_url, "--import", "tests.control_ajobs", "--tube", "control")
    jid = enqueue(q, control_ajobs.sleeps, str(out))
    wait_for(lambda: lines(out), what="the task to start")
    _cancel_soon(q, jid, lambda: f"cancelled {jid}" in lines(out))
    _then_the_next_job_runs(q, w, control_ajobs.note, out, jid)


@slow
@pytest.mark.parametrize("module", ["tests.control_jobs", "tests.control_ajobs"])
def test_a_task_past_its_timeout_is_stopped_and_buried(q: sqlq.Queue, db_url: str,
                                                      tmp_path: Path, module: str) -> None:
    out = tmp_path / "out"
    task = control_jobs.overruns if module == "tests.control_jobs" else control_ajobs.overruns
    w = Work(db_url, "--import", module, "--tube", "control")
    put = time.monotonic()
    jid = enqueue(q, task, str(out))
    wait_for(lambda: lines(out), what="the task to start")
    started = time.monotonic()
    wait_for(lambda: q.stats_job(jid)["state"] == "buried", what="the burial")
    assert time.monotonic() - put >= 1.0  # never before its timeout
    assert time.monotonic() - started < soon(1.0)
    stopped = lines(out)[-1]
    assert stopped in (f"stopped {jid} Timeout", f"cancelled {jid}")
    job = q.peek(jid)
    assert job is not None and job.bury_reason is not None and "timeout of 1s" in job.bury_reason
    w.signal()
    assert w.wait() == 0


@slow
def test_result_waiters_see_a_tasks_progress(q: sqlq.Queue, db_url: str,
                                            tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.write_text("")
    w = Work(db_url, "--import", "tests.control_jobs", "--tube", "control")
    jid = enqueue(q, control_jobs.reports, str(out))
    seen: list[tuple[Any, str]] = []

    def on_progress(value: Any, message: str) -> None:
        seen.append((value, message))
        if value == 0.5:
            out.write_text("go\n")

    assert q.result(jid, timeout=30, on_progress=on_progress) == b'"ok"'
    assert seen[0] == (0.5, "halfway")
    w.signal()
    assert w.wait() == 0


@pytest.mark.parametrize("verb", [b"delete", b"touch", b"release", b"bury"])
def test_a_cancelled_job_through_the_beanstalkd_protocol_is_not_found(srv: Any,
                                                                      verb: bytes) -> None:
    """A client holding a job that is cancelled meets what a lost lease answers: NOT_FOUND;
    the job is gone for every client, and the others' jobs stand."""
    from tests.servers import Raw

    raw = Raw(srv.address)
    try:
        raw.send(b"put 0 0 60 1\r\nx\r\nput 1 0 60 1\r\ny\r\n")
        assert raw.reply() == b"INSERTED 1\r\n"
        assert raw.reply() == b"INSERTED 2\r\n"
        assert raw.cmd(b"reserve") == b"RESERVED 1 1\r\nx\r\n"
        with sqlq.Queue(srv.path) as admin:
            admin.cancel(1)  # as `sqlq cancel 1` would, from another process
        line = verb + b" 1" + (b" 0 0" if verb == b"release" else b" 0" if verb == b"bury"
                               else b"")
        assert raw.cmd(line) == b"NOT_FOUND\r\n"
        assert raw.cmd(b"peek 1") == b"NOT_FOUND\r\n"
        assert raw.cmd(b"reserve-with-timeout 0") == b"RESERVED 2 1\r\ny\r\n"
        assert raw.cmd(b"delete 2") == b"DELETED\r\n"
        assert raw.cmd(b"reserve-with-timeout 0") == b"TIMED_OUT\r\n"
    finally:
        raw.close()


def test_the_dashboard_shows_progress_and_cancels_a_running_job(q: sqlq.Queue) -> None:
    """The job page shows what the job reported and a Cancel button; the button's action
    cancels the job (its holder gets JobCancelled)."""
    from tests.dashboard_client import running

    jid = q.put(b"x")
    other = q.put(b"y")
    job = q.reserve(timeout=0)
    assert job is not None and job.id == jid
    with running(q) as client:
        page = client.get(f"/job?id={jid}")
        assert page.status == 200 and 'data-action="cancel-job"' in page.text
        assert 'id="progress"' not in page.text
        job.progress(0.25, "1 of 4 <b>")
        page = client.get(f"/job?id={jid}")
        assert '<progress value="0.25" max="1">' in page.text
        assert "25%" in page.text and "1 of 4 &lt;b&gt;" in page.text  # escaped
        # shown as a note, not in the red of a bury reason (newcomer.md: read as an error)
        assert '<span class="muted">1 of 4 &lt;b&gt;</span>' in page.text
        reply = client.post("/actions/cancel-job", {"id": str(jid), "csrf": client.csrf,
                                                    "next": f"/job?id={jid}"})
        assert reply.status == 303 and "cancelled" in reply.headers["Location"]
        assert client.post("/actions/cancel-job", {"id": str(jid), "csrf": "guess"}
                           ).status == 403
    assert q.peek(jid) is None and q.peek(other) is not None
    with pytest.raises(sqlq.JobCancelled):
        job.touch()


@slow
def test_a_job_cancelled_in_the_batch_a_worker_holds_never_starts(
        q: sqlq.Queue, db_url: str, tmp_path: Path) -> None:
    out = tmp_path / "out"
    first = enqueue(q, control_jobs.looks, str(out), "current")
    held = enqueue(q, control_jobs.note, str(out), "held")
    w = Work(db_url, "--import", "tests.control_jobs", "--tube", "control", "--prefetch", "2")
    wait_for(lambda: lines(out), what="the first task to start")
    assert q.stats()["current-jobs-reserved"] == 2  # both claimed in one batch
    q.cancel(held)
    q.cancel(first)
    w.wait_log(f"job {held}  cancelled: dropped before it started")
    _then_the_next_job_runs(q, w, control_jobs.note, out, first)
    assert "held" not in lines(out)
