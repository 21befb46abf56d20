"""What an operator reads on the dashboard beyond the counts (issue 34), over real HTTP on
both backends: the put's and each failed run's trace id, linked to a tracing UI by
``--trace-url``; a periodic task whose tube no worker watches; where a cancel or a delete
returns to; and the request log (stamped as the audit lines, no query string of an
action, never the CSRF token)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import urllib.error
import urllib.request

import pytest
from click.testing import CliRunner

import sqlq
from sqlq.attempts import Attempt
from sqlq.cli import EXIT_ERROR, cli
from sqlq.core.durations import now_ms
from sqlq.dashboard import DashboardServer
from sqlq.tasks.periodic import Schedule
from sqlq.work.presence import Presence
from tests import forkserver
from tests.conftest import ROOT
from tests.dashboard_client import running

#: A traced put's stored context (traceparent, then tracestate), and a failed run's.
PUT_TRACE = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01\ncongo=t61rcWkgMzE"
RUN_TRACE = "00-4bf92f3577b34da6a3ce929d0e0e4736-b7ad6b7169203331-01"
TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
TEMPLATE = "https://jaeger.example/trace/{trace_id}?from=sqlq&uiFind=x"
STAMP = r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ"


def _trace(q: sqlq.Queue, job_id: int, context: str) -> None:
    """What a put under a recording span stores (the test process sets no provider)."""
    backend = q.backend
    backend.write(lambda c: backend.store.jobs.set_trace(c, [job_id], context))


def _fail_once(q: sqlq.Queue, job_id: int, trace: str | None) -> None:
    job = q.reserve(timeout=0)
    assert job is not None and job.id == job_id
    q.engine.end_attempt(job, Attempt(job_id, job.reserves, now_ms(), 0.2, "web-1", 7,
                                      "retried", "KeyError", "KeyError: 'x'", "Traceback ...",
                                      trace), 0)


def test_the_job_page_shows_the_puts_trace_id_and_each_failed_runs_linked(
        q: sqlq.Queue) -> None:
    traced = q.put(b"traced")
    _trace(q, traced, PUT_TRACE)
    _fail_once(q, traced, RUN_TRACE)
    untraced = q.put(b"untraced", tube="other")
    with running(q) as client:  # no template: the ids, not linked
        page = client.get(f"/job?id={traced}").text
    assert f'<code class="trace" title="traceparent {RUN_TRACE}">{TRACE_ID}</code>' in page
    assert '<td id="trace"><code class="trace"' in page and "<a class=\"trace\"" not in page
    with running(q, trace_url=TEMPLATE) as client:
        page = client.get(f"/job?id={traced}").text
        plain = client.get(f"/job?id={untraced}").text
    link = ('<a class="trace" href="https://jaeger.example/trace/'
            f'{TRACE_ID}?from=sqlq&amp;uiFind=x" rel="noreferrer"')
    row = page[page.index('<td id="trace">'):]
    assert row.startswith(f'<td id="trace">{link} title="traceparent '
                          f'{PUT_TRACE.split(chr(10))[0]}"><code>{TRACE_ID}</code></a>')
    attempts = page[page.index('id="attempts"'):]
    assert f'{link} title="traceparent {RUN_TRACE}"><code>{TRACE_ID}</code></a>' in attempts
    assert 'id="trace"' not in plain and "jaeger" not in plain


def test_a_stored_context_that_is_no_traceparent_is_shown_escaped_and_not_linked(
        q: sqlq.Queue) -> None:
    hostile = '"><script>alert(1)</script>'
    job = q.put(b"x")
    _trace(q, job, hostile)
    with running(q, trace_url=TEMPLATE) as client:
        page = client.get(f"/job?id={job}").text
    assert "<script>alert(1)" not in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "jaeger" not in page


@pytest.mark.parametrize("template, says", [
    ("https://jaeger.example/trace/", "must contain {trace_id}"),
    ("javascript:alert('{trace_id}')", "must be an http:// or https:// URL"),
    ("data:text/html,{trace_id}", "must be an http:// or https:// URL"),
    ("/trace/{trace_id}", "must be an http:// or https:// URL"),
    ("//evil.example/{trace_id}", "must be an http:// or https:// URL"),
    ("https://t.example/{trace_id}/{span_id}", "no braces but {trace_id}"),
    ("https://t.example/{trace_id}\" onmouseover=\"x", "no spaces or control characters"),
])
def test_a_bad_trace_url_is_refused_at_start_in_one_line(q: sqlq.Queue, db_url: str,
                                                         template: str, says: str) -> None:
    with pytest.raises(sqlq.Error, match=re.escape(says)) as caught:
        DashboardServer(q, "127.0.0.1:0", trace_url=template)
    assert "\n" not in str(caught.value)
    for args, env in ((["--trace-url", template], {}),
                      ([], {"SQLQ_DASHBOARD_TRACE_URL": template})):
        result = CliRunner().invoke(cli, ["--db", db_url, "dashboard", "--listen",
                                          "127.0.0.1:0", *args], env=env)
        assert result.exit_code == EXIT_ERROR
        assert result.output.count("\n") == 1 and says in result.output


def test_the_periodic_page_warns_of_a_tube_no_worker_watches(q: sqlq.Queue) -> None:
    q.put_many([b"tick", b"tick"], tube="lonely")
    schedules = {"app.tick": Schedule(every=60), "app.tock": Schedule(every=60)}
    tubes = {"app.tick": "lonely", "app.tock": "watched"}
    presence = Presence(q, ["watched", "other"])
    presence.beat()  # this process, registered as a sqlq work watching two tubes
    try:
        with running(q, schedules=schedules, periodic_tubes=tubes) as client:
            page = client.get("/periodic").text
    finally:
        presence.stop()
    rows = {name: row for row in page.split("<tr>")[2:]
            for name in schedules if f"<td>{name}</td>" in row}
    assert 'href="/tube?name=lonely"' in rows["app.tick"]
    assert ("No running <code>sqlq work</code> watches this tube: its jobs pile up unseen "
            "(2 ready)") in rows["app.tick"]
    assert 'href="/tube?name=watched"' in rows["app.tock"] and "unseen" not in rows["app.tock"]
    with running(q, schedules=schedules, periodic_tubes=tubes) as client:
        assert client.get("/periodic").text.count("pile up unseen") == 2  # it stopped


@pytest.mark.parametrize("verb", ["cancel-job", "delete-job"])
def test_after_a_cancel_or_delete_from_the_job_page_the_redirect_answers(
        q: sqlq.Queue, verb: str) -> None:
    """The job is gone: its page would answer 404; its tube's page says what was done."""
    kept = q.put(b"y", tube="slow/jobs")
    q.bury(q.reserve("slow/jobs", timeout=0).id)  # type: ignore[union-attr]
    job = q.put(b"x", tube="slow/jobs")
    with running(q) as client:
        reply = client.post(f"/actions/{verb}", {"csrf": client.csrf, "id": job,
                                                 "next": f"/job?id={job}"})
        assert reply.status == 303
        where = reply.headers["Location"]
        assert where.startswith("/tube?name=slow%2Fjobs&note=job+")
        landed = client.get(where)
        assert landed.status == 200 and f"job {job} " in landed.text
        # Another page, or the page of a job still there, is returned to as asked.
        reply = client.post("/actions/kick-job", {"csrf": client.csrf, "id": kept,
                                                  "next": f"/job?id={kept}"})
        assert reply.headers["Location"].startswith(f"/job?id={kept}&note=")
        # The job page's own Cancel button (its form's next) lands on a page too.
        other = q.put(b"z", tube="slow/jobs")
        form = dict(re.findall(r'name="(next|id)" value="([^"]*)"', client.get(
            f"/job?id={other}").text.split(f'action="/actions/{verb}"', 1)[1])[:2])
        reply = client.post(f"/actions/{verb}", {"csrf": client.csrf,
                                                 "next": form["next"].replace("&amp;", "&"),
                                                 "id": form["id"]})
        assert client.get(reply.headers["Location"]).status == 200
    assert q.peek(job) is None and q.peek(other) is None


@pytest.mark.sqlite_only
def test_the_served_dashboard_logs_stamped_requests_without_secrets(db_path: str) -> None:
    """``sqlq dashboard`` as operators run it, with --import and --trace-url: its periodic
    page knows the task's tube (tests/periodic_jobs.py: ``ticks``, watched by nobody),
    its job page links the trace, and its request log lines start with the audit line's
    timestamp and hold no query string of an action and no CSRF token."""
    with sqlq.Queue(db_path) as q:
        job = q.put(b"x")
        _trace(q, job, PUT_TRACE)
    env = dict(os.environ, PYTHONPATH=str(ROOT), SQLQ_DB=db_path,
               SQLQ_DASHBOARD_TRACE_URL=TEMPLATE)
    proc = forkserver.Popen([sys.executable, "-m", "sqlq", "--db", db_path, "dashboard",
                             "--listen", "127.0.0.1:0", "--import", "tests.periodic_jobs"],
                            stderr=subprocess.PIPE, text=True, env=env)
    try:
        assert proc.stderr is not None
        base = re.search(r"on (http://\S+)", proc.stderr.readline())
        assert base is not None

        def get(path: str) -> tuple[int, str]:
            try:
                with urllib.request.urlopen(base.group(1).rstrip("/") + path, timeout=30) as r:
                    return r.status, r.read().decode()
            except urllib.error.HTTPError as e:
                return e.code, ""

        periodic = get("/periodic")[1]
        assert 'href="/tube?name=ticks"' in periodic and "pile up unseen (0 ready)" in periodic
        assert f'href="https://jaeger.example/trace/{TRACE_ID}?from=sqlq' in get(
            f"/job?id={job}")[1]
        secret = "SECRETcsrfVALUE"
        assert get(f"/actions/cancel-job?id={job}&csrf={secret}")[0] == 404
        assert get(f"/tube?name=default&csrf={secret}")[0] == 200
    finally:
        proc.terminate()
        _, err = proc.communicate(timeout=30)
    lines = [line for line in err.splitlines() if '"GET ' in line]
    assert len(lines) == 4, err
    for line in lines:
        assert re.match(rf"{STAMP} 127\.0\.0\.1 \"GET /", line), line
    assert secret not in err
    assert '"GET /actions/cancel-job HTTP/1.1" 404' in lines[2]
    assert '"GET /tube?name=default&csrf=[redacted] HTTP/1.1" 200' in lines[3]


def test_request_log_lines_are_stamped_and_hold_no_csrf_token(
        q: sqlq.Queue, capfd: pytest.CaptureFixture[str]) -> None:
    with running(q, log=True) as client:
        capfd.readouterr()
        assert client.get(f"/actions/cancel-job?id=1&csrf={client.csrf}").status == 404
        assert client.get(f"/tube?name=default&csrf={client.csrf}").status == 200
        assert client.post("/actions/pause", {"csrf": client.csrf, "tube": "t"}).status == 303
        csrf = client.csrf
    err = capfd.readouterr().err
    lines = [line for line in err.splitlines() if "HTTP/1.1" in line]
    assert [re.sub(STAMP, "T", line) for line in lines] == [
        'T 127.0.0.1 "GET /actions/cancel-job HTTP/1.1" 404 -',
        'T 127.0.0.1 "GET /tube?name=default&csrf=[redacted] HTTP/1.1" 200 -',
        'T 127.0.0.1 "POST /actions/pause HTTP/1.1" 303 -',
    ]
    assert csrf not in err
    audit = [line for line in err.splitlines() if line.startswith("sqlq dashboard: ")]
    assert len(audit) == 1 and re.match(rf"sqlq dashboard: {STAMP} 127\.0\.0\.1 pause", audit[0])
