"""Durable steps through the worker's faces (issue 40): ``@q.task`` functions (plain and
async) that fail after their steps, or snooze; ``sqlq work -- COMMAND`` scripts that wrap
their steps in ``sqlq step``; ``sqlq peek``'s view of them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import sqlq
from tests import forkserver
from tests.step_jobs import awaiting, snoozing, twice_failing
from tests.workers import ROOT, Work, lines, wait_for

pytestmark = pytest.mark.timeout(60)


def _enqueue(q: sqlq.Queue, task: Any, *args: Any) -> int:
    return q.put(task.message(*args), tube=task.tube, ttr=task.ttr)


def _sqlq(db_url: str, *args: str, env: dict[str, str] | None = None
          ) -> subprocess.CompletedProcess[str]:
    return forkserver.run([sys.executable, "-m", "sqlq", "--db", db_url, *args],
                          capture_output=True, text=True, cwd=ROOT, check=False,
                          env={**os.environ, "PYTHONPATH": str(ROOT), **(env or {})})


def test_a_retried_task_skips_the_steps_it_finished(q: sqlq.Queue, db_url: str,
                                                    tmp_path: Path) -> None:
    calls = tmp_path / "calls"
    jid = _enqueue(q, twice_failing, str(calls))
    with Work(db_url, "--import", "tests.step_jobs", "--tube", "steps") as w:
        assert q.result(jid, timeout=30) == b'"done"', w.text()
        assert w.stop() == 0
    assert lines(calls) == [f"{jid} a", f"{jid} b"]  # once each, across two runs


@pytest.mark.slow
@pytest.mark.parametrize("concurrency", ["1", "2"])  # the worker, the event-loop worker
def test_a_snoozed_task_comes_back_without_an_attempt_counted(
        q: sqlq.Queue, db_url: str, tmp_path: Path, concurrency: str) -> None:
    calls = tmp_path / "calls"
    jid = _enqueue(q, snoozing, str(calls))
    with Work(db_url, "--import", "tests.step_jobs", "--tube", "steps", "--concurrency",
              concurrency) as w:
        wait_for(lambda: len(lines(calls)) == 2, what="the run after the snooze")
        wait_for(lambda: q.peek(jid) is None, what="the job's delete")
        assert w.stop() == 0
    # retries=0: a counted attempt would have buried the job instead of running it again.
    assert lines(calls) == [f"{jid} before", f"{jid} after 1"]
    assert f"job {jid} tests.step_jobs.snoozing snoozed" in w.text()


def test_an_async_task_awaits_its_step(q: sqlq.Queue, db_url: str, tmp_path: Path) -> None:
    calls = tmp_path / "calls"
    jid = _enqueue(q, awaiting, str(calls))
    with Work(db_url, "--import", "tests.step_jobs", "--tube", "steps", "--burst",
              "--concurrency", "2") as w:
        assert w.wait() == 0, w.text()
    assert q.result(jid, timeout=0) == b'"value"'
    assert lines(calls) == [f"{jid} awaited"]


@pytest.mark.slow
def test_a_command_skips_the_steps_an_earlier_run_did(q: sqlq.Queue, db_url: str,
                                                      tmp_path: Path) -> None:
    calls, once = tmp_path / "calls", tmp_path / "failed-once"
    script = (f"set -e; sqlq step one -- sh -c 'echo one >> {calls}'; "
              f"sqlq step two --capture -- sh -c 'echo two >> {calls}; echo out-two'; "
              f"[ -f {once} ] || {{ touch {once}; exit 7; }}; "
              f"sqlq step three -- sh -c 'echo three >> {calls}'")
    jid = q.put(b"x", tube="sh")
    bin_dir = str(Path(sys.executable).parent)
    with Work(db_url, "--tube", "sh", "--retries", "1", "--backoff", "0",
              "--", "sh", "-c", script, env={"PATH": f"{bin_dir}:{os.environ['PATH']}"}) as w:
        wait_for(lambda: q.peek(jid) is None, what="the job's second run")
        assert w.stop() == 0
    assert lines(calls) == ["one", "two", "three"]


@pytest.mark.slow
def test_sqlq_step_records_only_under_the_live_lease(q: sqlq.Queue, db_url: str) -> None:
    jid = q.put(b"x")
    job = q.reserve(timeout=0)
    assert job is not None and job.lease is not None
    env = {"SQLQ_JOB_ID": str(jid), "SQLQ_LEASE": str(job.lease + 1)}
    lost = _sqlq(db_url, "step", "s", "--", "true", env=env)
    assert lost.returncode == 1 and "lease lost" in lost.stderr and q.views.steps(jid) == []
    failed = _sqlq(db_url, "step", "s", "--", "sh", "-c", "exit 5",
                   env={**env, "SQLQ_LEASE": str(job.lease)})
    assert failed.returncode == 5 and q.views.steps(jid) == []
    done = _sqlq(db_url, "step", "s", "--capture", "--", "echo", "hello",
                 env={**env, "SQLQ_LEASE": str(job.lease)})
    assert done.returncode == 0 and done.stdout == "hello\n"
    again = _sqlq(db_url, "step", "s", "--capture", "--", "echo", "not run", env=env)
    assert again.returncode == 0 and again.stdout == "hello\n"  # skipped: the kept output
    peek = _sqlq(db_url, "peek", str(jid))
    assert peek.returncode == 0 and "step s: done " in peek.stdout
    record = json.loads(_sqlq(db_url, "peek", str(jid), "--json").stdout)
    assert [s["name"] for s in record["steps"]] == ["s"] and record["cursors"] == []


@pytest.mark.face
def test_sqlq_step_needs_a_job_and_a_command(db_url: str) -> None:
    sqlq.Queue(db_url).close()
    env = {"SQLQ_JOB_ID": "", "SQLQ_LEASE": ""}
    no_job = _sqlq(db_url, "step", "s", "--", "true", env=env)
    assert no_job.returncode == 2 and "no job" in no_job.stderr
    no_command = _sqlq(db_url, "step", "s", env={"SQLQ_JOB_ID": "1", "SQLQ_LEASE": "1"})
    assert no_command.returncode == 2 and "COMMAND" in no_command.stderr


def test_the_dashboards_job_page_shows_steps_and_cursors(q: sqlq.Queue) -> None:
    from tests.dashboard_client import running

    jid = q.put(b"x")
    job = q.reserve(timeout=0)
    assert job is not None
    job.step("charge <card>", lambda: {"receipt": "r-1"})
    job.save_cursor("row", 1234)
    plain = q.put(b"y")
    with running(q) as client:
        page = client.get(f"/job?id={jid}").text
        other = client.get(f"/job?id={plain}").text
    steps = page[page.index('id="steps"'):]
    assert "charge &lt;card&gt;" in steps and "{&#34;receipt&#34;: &#34;r-1&#34;}" in steps
    assert "row <small class=\"muted\">cursor</small>" in steps and "1234" in steps
    assert 'id="steps"' not in other


DJANGO_STEPS = """
import sys

import django
import sqlq
from django.conf import settings

url = sys.argv[1]
if "://" in url:
    from psycopg.conninfo import conninfo_to_dict

    d = conninfo_to_dict(url)
    db = {"ENGINE": "django.db.backends.postgresql", "NAME": d["dbname"],
          "USER": d.get("user", ""), "HOST": d.get("host", ""), "PORT": d.get("port", "")}
    q = sqlq.Queue(url)
else:
    db = {"ENGINE": "django.db.backends.sqlite3", "NAME": url}
    q = sqlq.Queue(url, driver="sqlite3")  # Django's SQLite is Python's sqlite3
settings.configure(DATABASES={"default": db}, USE_TZ=True)
django.setup()
from django.db import connection, transaction

with connection.cursor() as c:
    c.execute("CREATE TABLE ledger (n INTEGER)")
jid = q.put(b"x")
job = q.reserve(timeout=0)


def write():
    with connection.cursor() as c:
        c.execute("INSERT INTO ledger VALUES (1)")
    return "written"


try:
    with transaction.atomic():
        job.step("rolled back", write, conn=connection)
        raise RuntimeError
except RuntimeError:
    pass
with transaction.atomic():
    job.step("atomic", write, conn=connection)
job.step("autocommit", write, conn=connection)
job.step("autocommit", write, conn=connection)
with connection.cursor() as c:
    c.execute("SELECT count(*) FROM ledger")
    print([s["name"] for s in q.stats_job(jid)["steps"]], c.fetchone()[0])
"""


@pytest.mark.slow
@pytest.mark.pg_fresh  # it makes a table
def test_a_step_through_djangos_connection(db_url: str) -> None:
    run = forkserver.run([sys.executable, "-c", DJANGO_STEPS, db_url], capture_output=True,
                         text=True, cwd=ROOT, check=False, timeout=60,
                         env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "['atomic', 'autocommit'] 2"


@pytest.mark.slow
def test_a_finished_jobs_page_and_peek_show_its_steps(q: sqlq.Queue, db_url: str) -> None:
    from tests.dashboard_client import running

    jid = q.put(b"x")
    job = q.reserve(timeout=0)
    assert job is not None
    job.step("charge <card>", lambda: {"receipt": "r-1"})
    job.save_cursor("row", 1234)
    job.delete()
    plain = q.put(b"y")
    q.delete(plain)
    with running(q) as client:
        page = client.get(f"/job?id={jid}").text
        other = client.get(f"/job?id={plain}").text
    assert 'id="ended"' in page
    steps = page[page.index('id="steps"'):]
    assert "charge &lt;card&gt;" in steps and "{&#34;receipt&#34;: &#34;r-1&#34;}" in steps
    assert "row <small class=\"muted\">cursor</small>" in steps and "1234" in steps
    assert 'id="ended"' in other and 'id="steps"' not in other
    peek = _sqlq(db_url, "peek", str(jid))
    assert peek.returncode == 3 and f"job {jid} not found: done " in peek.stderr
    assert "step charge <card>: done " in peek.stdout and "cursor row: 1234" in peek.stdout
    record = json.loads(_sqlq(db_url, "peek", str(jid), "--json").stdout)["finished"]
    assert [(s["name"], s["value"]) for s in record["steps"]] == [
        ("charge <card>", {"receipt": "r-1"})]
    assert [(c["name"], c["value"]) for c in record["cursors"]] == [("row", 1234)]
    assert _sqlq(db_url, "peek", str(plain)).stdout == ""
