"""``sqlq work -- COMMAND``: one child process per job, killed at its TTR."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest

import sqlq
from tests.timing import soon
from tests.workers import Work, alive, children, lines, wait_for

pytestmark = pytest.mark.timeout(60)


def test_success_gets_body_on_stdin_and_job_env(q: sqlq.Queue, db_url: str,
                                                tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    body = b"line one\nline two \x00\xff binary"
    jid = q.put(body, tube="sh")
    script = 'cat > "$OUT/$SQLQ_JOB_ID"; echo "$SQLQ_TUBE $SQLQ_ATTEMPT $SQLQ_DB" > "$OUT/env"'
    with Work(db_url, "--tube", "sh", "--burst", "--", "sh", "-c", script,
              env={"OUT": str(out)}) as w:
        assert w.wait() == 0, w.text()
    assert (out / str(jid)).read_bytes() == body
    exported = db_url if "://" in db_url else str(Path(db_url).resolve())
    assert (out / "env").read_text().split() == ["sh", "1", exported]
    assert q.peek(jid) is None
    assert f"job {jid} sh done in" in w.text()


def test_failure_retries_then_buries_with_status_and_last_stderr_line(
        q: sqlq.Queue, db_url: str, tmp_path: Path) -> None:
    attempts = tmp_path / "attempts"
    jid = q.put(b"x", tube="sh")
    script = f'echo "$SQLQ_ATTEMPT" >> {attempts}; echo noise >&2; echo "disk full" >&2; exit 3'
    with Work(db_url, "--tube", "sh", "--retries", "1", "--backoff", "50ms",
              "--", "sh", "-c", script) as w:
        wait_for(lambda: (j := q.peek(jid)) and j.state == "buried", what="a burial")
        assert w.stop() == 0
    job = q.peek(jid)
    assert job is not None
    assert job.bury_reason == "exit status 3: disk full"
    assert lines(attempts) == ["1", "2"]
    assert "disk full" in w.text()  # the command's stderr passes through to the log


@pytest.mark.slow
def test_command_still_running_at_its_ttr_is_killed_with_its_process_group(
        q: sqlq.Queue, db_url: str, tmp_path: Path) -> None:
    pids = tmp_path / "pids"
    jid = q.put(b"x", tube="sh", ttr=2)
    # The command starts a grandchild: killing the group must take it too.
    script = f'sleep 60 & echo "$$ $!" > {pids}; wait'
    with Work(db_url, "--tube", "sh", "--retries", "0", "--", "sh", "-c", script) as w:
        wait_for(lambda: lines(pids), what="the command to start")
        started = time.monotonic()
        wait_for(lambda: (j := q.peek(jid)) and j.state == "buried", what="a burial")
        assert time.monotonic() - started < 6
        assert w.stop() == 0
    job = q.peek(jid)
    assert job is not None and job.timeouts == 0  # killed before the TTR ran out
    assert "killed: still running when its TTR of 2s ran out" in str(job.bury_reason)
    shell, grandchild = map(int, lines(pids)[0].split())
    wait_for(lambda: not alive(shell) and not alive(grandchild), timeout=5,
             what="the process group to be gone")


@pytest.mark.slow
def test_keepalive_lets_a_command_outlive_its_ttr(q: sqlq.Queue, db_url: str,
                                                  tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    jid = q.put(b"x", tube="sh", ttr=1)
    with Work(db_url, "--tube", "sh", "--keepalive", "--processes", "2", "--",
              "sh", "-c", f"echo run >> {runs}; sleep 2.5") as w:
        wait_for(lambda: q.peek(jid) is None, timeout=20, what="the job to finish")
        assert w.stop() == 0
    assert lines(runs) == ["run"]


def test_sigterm_releases_a_command_that_outlasts_the_grace_period(
        q: sqlq.Queue, db_url: str, tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    jid = q.put(b"x", tube="sh", ttr=60)
    with Work(db_url, "--tube", "sh", "--grace", "0.3", "--",
              "sh", "-c", f"echo $$ >> {runs}; sleep 60") as w:
        wait_for(lambda: lines(runs), what="the command to start")
        assert w.stop(timeout=10) == 0
    job = q.peek(jid)
    assert job is not None and job.state == "ready" and job.reserves == 1
    assert not alive(int(lines(runs)[0]))


@pytest.mark.parametrize("command", ["./make-thumbnail.sh", "no-such-program-here",
                                     "not-executable.sh", "."])
def test_a_command_that_cannot_run_is_refused_before_any_job_is_reserved(
        q: sqlq.Queue, db_url: str, tmp_path: Path, command: str) -> None:
    """newcomer.md #9: a worker given a missing command started and buried every job."""
    (tmp_path / "not-executable.sh").write_text("#!/bin/sh\nexit 0\n")
    jid = q.put(b"x", tube="sh")
    with Work(db_url, "--tube", "sh", "--burst", "--", command, cwd=tmp_path) as w:
        assert w.wait() == 1, w.text()
    out = w.text().strip()
    assert out.startswith(f"sqlq: cannot run {command}: ") and len(out.splitlines()) == 1, out
    job = q.peek(jid)
    assert job is not None and job.state == "ready" and job.reserves == 0


def test_a_command_gone_after_the_start_fails_its_jobs_and_buries_them(
        q: sqlq.Queue, db_url: str, tmp_path: Path) -> None:
    script = tmp_path / "step.sh"
    script.write_text("#!/bin/sh\ncat > /dev/null\n")
    script.chmod(0o755)
    first = q.put(b"x", tube="sh")
    with Work(db_url, "--tube", "sh", "--retries", "0", "--", str(script)) as w:
        wait_for(lambda: q.peek(first) is None, what="the first job to run")
        script.unlink()  # a deploy in progress: a failure like any other
        jid = q.put(b"y", tube="sh")
        wait_for(lambda: (j := q.peek(jid)) and j.state == "buried", what="a burial")
        assert w.stop() == 0
    job = q.peek(jid)
    assert job is not None and f"cannot run {script}" in str(job.bury_reason)


@pytest.mark.slow
def test_a_sigkilled_worker_takes_its_command_and_what_it_started_with_it(
        q: sqlq.Queue, db_url: str, tmp_path: Path) -> None:
    """Reliability W1: the job a SIGKILLed worker held comes back at once and runs
    again; the first run (the command and its grandchild) must be gone by then."""
    runs = tmp_path / "runs"
    jid = q.put(b"x", tube="sh", ttr=300)
    script = f'sleep 60 & echo "start $$ $!" >> {runs}; wait; echo "end $$" >> {runs}'
    with Work(db_url, "--tube", "sh", "--grace", "0.3", "--", "sh", "-c", script) as w:
        first = wait_for(lambda: lines(runs), what="the command to start")
        shell, grandchild = map(int, first[0].split()[1:])
        (worker,) = children(w.pid)
        os.kill(worker, signal.SIGKILL)
        wait_for(lambda: len(lines(runs)) >= 2, what="the job to run again")
        # Neither the command nor what it started outlived the worker that ran it.
        assert not alive(shell) and not alive(grandchild), lines(runs)
        assert w.stop() == 0
    assert [line.split()[0] for line in lines(runs)] == ["start", "start"]
    job = q.peek(jid)
    assert job is not None and job.state == "ready" and job.reserves == 2
    assert f"killed the command's process group {shell}" in w.text()


@pytest.mark.slow
@pytest.mark.parametrize("victims", ["worker", "supervisor and worker"])
def test_a_command_dies_with_its_worker_even_with_no_supervisor_left(
        q: sqlq.Queue, db_url: str, tmp_path: Path, victims: str) -> None:
    """The kernel's PR_SET_PDEATHSIG, not the supervisor, stops the command here."""
    runs = tmp_path / "runs"
    q.put(b"x", tube="sh", ttr=300)
    # exec: the command's own process is the one that must go.
    script = f'echo "$$" >> {runs}; exec sleep 60'
    with Work(db_url, "--tube", "sh", "--grace", "0.3", "--", "sh", "-c", script) as w:
        (command,) = map(int, wait_for(lambda: lines(runs), what="the command to start"))
        wait_for(lambda: alive(command) and "sleep" in Path(f"/proc/{command}/cmdline")
                 .read_text(), what="the exec")
        (worker,) = children(w.pid)
        if victims != "worker":
            os.kill(w.pid, signal.SIGKILL)
            w.wait()
        os.kill(worker, signal.SIGKILL)
        wait_for(lambda: not alive(command), timeout=soon(), what="the command to die")
        if victims == "worker":
            wait_for(lambda: len(lines(runs)) >= 2, what="the job to run again")
            assert w.stop() == 0
    assert lines(runs)[0] == str(command)
