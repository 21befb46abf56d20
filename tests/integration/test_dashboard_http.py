"""Every dashboard route over real HTTP, /metrics through prometheus-client's own parser,
and the security rules (CSRF, read-only, Host, token, escaping)."""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Iterator

import pytest
from click.testing import CliRunner
from prometheus_client.parser import text_string_to_metric_families

import sqlq
from sqlq.cli import cli
from sqlq.dashboard import DashboardServer
from sqlq.dashboard.views import show_body
from tests import forkserver
from tests.dashboard_client import Client, running
from tests.servers import require

HOSTILE = "<script>alert(1)</script>"
IMG = '<img src=x onerror="alert(2)">'
TOKEN = "correct horse battery staple"


@pytest.fixture
def filled(q: sqlq.Queue) -> sqlq.Queue:
    """Jobs in every state, a hostile body, key and bury reason, a pause, a topic."""
    for i in range(3):
        q.put(json.dumps({"n": i}), tube="mail", priority=100 * i)
    q.put(HOSTILE, tube="mail", unique_key=IMG)
    q.put("later", tube="mail", delay=600)
    q.put(b"\x00\x01\xfe binary", tube="mail")
    job = q.reserve("mail", timeout=0)
    assert job is not None
    job.bury(reason=f"Traceback\nValueError: {HOSTILE}")
    q.reserve("mail", timeout=0)
    q.subscribe("orders", "billing")
    q.pause_tube("billing", 600)
    return q


@pytest.fixture
def client(filled: sqlq.Queue) -> Iterator[Client]:
    with running(filled) as c:
        yield c


def _post_forms(html: str) -> list[str]:
    return re.findall(r'<form method="post" action="([^"]+)"', html)


def test_every_page_answers(client: Client, filled: sqlq.Queue) -> None:
    hostile_id = filled.views.search("mail", "alert")[0].id
    pages = ["/", "/tube?name=mail", "/tube?name=billing", "/tube?name=nosuch",
             "/tube?name=mail&q=alert", f"/job?id={hostile_id}", "/job?id=1",
             "/workers", "/periodic", "/topics", "/static/dashboard.css",
             "/static/dashboard.js", "/static/favicon.svg"]
    pages += [f"/tube?name=mail&state={s}" for s in ("ready", "delayed", "reserved", "buried")]
    for page in pages:
        reply = client.get(page)
        assert reply.status == 200, (page, reply.text[:300])
        assert "default-src 'none'" in reply.headers["Content-Security-Policy"]
    assert "mail" in client.get("/").text and "billing" in client.get("/topics").text
    assert "Traceback" in client.get("/job?id=1").text
    api = json.loads(client.get("/api/overview").text)
    assert api["tubes"]["mail"]["buried"] == 1 and api["tubes"]["mail"]["reserved"] == 1
    assert api["puts"] == 6


@pytest.mark.face
@pytest.mark.parametrize("page, status", [
    ("/nosuch", 404), ("/job?id=999", 404), ("/job?id=x", 400), ("/tube?name=mail&state=x", 400),
    ("/tube?name=bad%20name", 400), ("/static/../queue.py", 404), ("/tube?name=mail&after=x", 400),
    ("/static/nosuch.css", 404),
])
def test_bad_requests_are_pages_not_tracebacks(client: Client, page: str, status: int) -> None:
    reply = client.get(page)
    assert reply.status == status
    assert "Traceback" not in reply.text and "<h1>" in reply.text


def test_oversized_forms_are_refused(client: Client, filled: sqlq.Queue) -> None:
    reply = client.post("/actions/bulk", {"csrf": client.csrf, "verb": "delete",
                                          "confirm": "yes", "ids": ["1"] * 60_000})
    assert reply.status == 413 and filled.peek(1) is not None


def test_paging_and_search(q: sqlq.Queue) -> None:
    ids = q.put_many([f"job {i}" for i in range(120)], tube="t")
    with running(q) as c:
        first = c.get("/tube?name=t").text
        assert f"/job?id={ids[0]}" in first and f"/job?id={ids[50]}" not in first
        more = re.search(r'href="(/tube\?[^"]*after=[^"]*)" rel="next"', first)
        assert more is not None
        second = c.get(more.group(1).replace("&amp;", "&")).text
        assert f"/job?id={ids[50]}" in second and f"/job?id={ids[49]}\"" not in second
        found = c.get("/tube?name=t&q=job+77").text
        assert f"/job?id={ids[77]}" in found and f"/job?id={ids[76]}\"" not in found


def test_hostile_values_are_escaped_everywhere(client: Client, filled: sqlq.Queue) -> None:
    hostile_id = filled.views.search("mail", "alert")[0].id
    for page in ("/tube?name=mail", "/tube?name=mail&state=buried", "/tube?name=mail&q=alert",
                 f"/job?id={hostile_id}", "/job?id=1", "/?note=" + HOSTILE):
        html = client.get(page).text
        assert "<script>alert" not in html and "<img src=x" not in html, page
    job_page = client.get(f"/job?id={hostile_id}").text
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in job_page
    assert "&lt;img src=x onerror=" in job_page


def test_metrics_parse_and_agree_with_the_file(client: Client, filled: sqlq.Queue) -> None:
    reply = client.get("/metrics")
    assert reply.status == 200 and reply.headers["Content-Type"].startswith("text/plain")
    families = {f.name: f for f in text_string_to_metric_families(reply.text)}
    samples = {(s.name, tuple(sorted(s.labels.items()))): s.value
               for f in families.values() for s in f.samples}
    assert samples["sqlq_jobs", (("state", "ready"), ("tube", "mail"))] == 3
    assert samples["sqlq_jobs", (("state", "buried"), ("tube", "mail"))] == 1
    assert samples["sqlq_jobs", (("state", "delayed"), ("tube", "mail"))] == 1
    assert samples["sqlq_jobs", (("state", "reserved"), ("tube", "mail"))] == 1
    assert samples["sqlq_tube_paused", (("tube", "billing"),)] == 1
    assert samples["sqlq_jobs_put_total", ()] == 6
    assert samples["sqlq_jobs_buried_total", (("tube", "mail"),)] == 1
    assert families["sqlq_jobs_put"].type == "counter"
    assert families["sqlq_oldest_ready_job_age_seconds"].type == "gauge"
    assert samples["sqlq_workers", ()] == 1
    filled.delete(2)
    again = {(s.name, tuple(sorted(s.labels.items()))): s.value
             for f in text_string_to_metric_families(client.get("/metrics").text)
             for s in f.samples}
    assert again["sqlq_jobs_deleted_total", ()] == 1


def test_sqlq_metrics_prints_the_same_text(filled: sqlq.Queue, db_url: str) -> None:
    result = CliRunner().invoke(cli, ["--db", db_url, "metrics"])
    assert result.exit_code == 0, result.output
    names = {f.name for f in text_string_to_metric_families(result.output)}
    assert {"sqlq_jobs", "sqlq_jobs_put", "sqlq_jobs_deleted", "sqlq_jobs_timed_out"} <= names


def test_actions_need_the_csrf_token(client: Client, filled: sqlq.Queue) -> None:
    form = {"id": "1", "next": "/job?id=1"}
    for bad in ({}, {"csrf": "guess"}):
        reply = client.post("/actions/kick-job", {**form, **bad})
        assert reply.status == 403 and "CSRF" in reply.text
    assert filled.peek(1).state == "buried"  # type: ignore[union-attr]
    reply = client.post("/actions/kick-job", {**form, "csrf": client.csrf})
    assert reply.status == 303 and reply.headers["Location"].startswith("/job?id=1&note=")
    assert filled.peek(1).state == "ready"  # type: ignore[union-attr]
    cross = client.post("/actions/delete-job", {"id": "1", "csrf": client.csrf},
                        headers={"Origin": "http://evil.example"})
    assert cross.status == 403 and filled.peek(1) is not None
    assert client.get("/actions/delete-job?id=1").status == 404  # actions are POSTs only
    assert client.post("/actions/delete-job", {"id": "1", "csrf": client.csrf,
                                               "next": "//evil.example/"}
                       ).headers["Location"].startswith("/?note=")
    assert filled.peek(1) is None


@pytest.mark.face
@pytest.mark.parametrize("target", ["//evil.example/", "/\\evil.example/", "https://evil.example/",
                                    "/x\r\nSet-Cookie: a=b", "/x y"])
def test_redirects_stay_on_this_site(client: Client, filled: sqlq.Queue, target: str) -> None:
    reply = client.post("/actions/resume", {"csrf": client.csrf, "tube": "billing",
                                            "next": target})
    assert reply.status == 303 and reply.headers["Location"].startswith("/?note=")
    assert "Set-Cookie" not in reply.headers


def test_bulk_actions_need_confirmation(client: Client, filled: sqlq.Queue) -> None:
    ids = [j.id for j in filled.job_page("mail", "ready")]
    form = {"csrf": client.csrf, "verb": "delete", "ids": ids, "next": "/tube?name=mail"}
    reply = client.post("/actions/bulk", form)
    assert reply.status == 303 and "confirm" in reply.headers["Location"]
    assert len(filled.job_page("mail", "ready")) == len(ids)
    client.post("/actions/bulk", {**form, "confirm": "yes"})
    assert filled.job_page("mail", "ready") == []
    kick_all = {"csrf": client.csrf, "tube": "mail", "next": "/"}
    client.post("/actions/kick-all", kick_all)
    assert filled.views.tube_summary("mail").buried == 1
    client.post("/actions/kick-all", {**kick_all, "confirm": "yes"})
    assert filled.views.tube_summary("mail").buried == 0


def test_pause_and_resume(client: Client, filled: sqlq.Queue) -> None:
    base = {"csrf": client.csrf, "tube": "mail", "next": "/tube?name=mail"}
    assert client.post("/actions/pause", {**base, "duration": "10m"}).status == 303
    assert filled.views.tube_summary("mail").paused_until is not None
    assert "Resume" in client.get("/tube?name=mail").text
    assert client.post("/actions/resume", base).status == 303
    assert filled.views.tube_summary("mail").paused_until is None
    assert client.post("/actions/pause", {**base, "duration": "soon"}).status == 400


def test_read_only_shows_and_accepts_no_action(filled: sqlq.Queue) -> None:
    with running(filled, read_only=True) as c:
        for page in ("/", "/tube?name=mail&state=buried", "/job?id=1", "/tube?name=mail"):
            html = c.get(page).text
            assert _post_forms(html) == [] and 'name="ids"' not in html, page
        reply = c.post("/actions/delete-job", {"id": "1", "csrf": c.csrf})
        assert reply.status == 403 and "read-only" in reply.text
    assert filled.peek(1) is not None


@pytest.mark.face
def test_a_foreign_host_header_is_refused(client: Client) -> None:
    """DNS rebinding: a page of evil.example resolved to 127.0.0.1 must not read us."""
    assert client.get("/", headers={"Host": "evil.example:8080"}).status == 403
    assert client.get("/", headers={"Host": "localhost:8080"}).status == 200


@pytest.mark.face
@pytest.mark.parametrize("host", [
    "127.evil.example", "127.evil.example:8080", "127.0.0.1.evil.example",
    "127.0.0.1.evil.example:8080", "localhost.evil.example", "evil-localhost",
    "[::1].evil.example", "[::2]:8080", "[127.0.0.1]", "127.0.0.1:80:80", "127.0.0.1:x",
    "0.0.0.0", "10.0.0.1:8080", "::1", "",
])
def test_a_host_that_only_looks_like_loopback_is_refused(client: Client, host: str) -> None:
    """Names are compared whole: a rebinding attacker controls 127.evil.example's DNS."""
    assert client.get("/", headers={"Host": host}).status == 403


@pytest.mark.face
@pytest.mark.parametrize("host", [
    "127.0.0.1", "127.0.0.1:8080", "127.1.2.3:80", "LOCALHOST:8080", "localhost",
    "[::1]", "[::1]:8080",
])
def test_loopback_hosts_are_accepted(client: Client, host: str) -> None:
    assert client.get("/", headers={"Host": host}).status == 200


def test_a_rebinding_page_can_neither_read_the_token_nor_delete(client: Client,
                                                                filled: sqlq.Queue) -> None:
    """The attack the 127.-prefix check let through: read the CSRF token under a
    127.-prefixed name, then POST a delete with matching Host and Origin."""
    evil = {"Host": "127.evil.example:8080", "Origin": "http://127.evil.example:8080"}
    page = client.get("/", headers=evil)
    assert page.status == 403 and client.csrf not in page.text
    job = filled.peek_ready("mail")
    assert job is not None
    reply = client.post("/actions/delete-job", {"id": job.id, "csrf": client.csrf},
                        headers=evil)
    assert reply.status == 403
    assert filled.peek(job.id) is not None


def test_beyond_loopback_needs_a_token(q: sqlq.Queue) -> None:
    with pytest.raises(sqlq.Error, match="without --token"):
        DashboardServer(q, "0.0.0.0:0")
    result = CliRunner().invoke(cli, ["--db", q.path, "dashboard", "--listen", "0.0.0.0:0"])
    assert result.exit_code == 1 and "without --token" in result.output
    # newcomer.md #44: a token read from a missing file is empty; say that, not "no token"
    result = CliRunner().invoke(cli, ["--db", q.path, "dashboard", "--listen", "0.0.0.0:0"],
                                env={"SQLQ_DASHBOARD_TOKEN": ""})
    assert result.exit_code == 1 and "$SQLQ_DASHBOARD_TOKEN is set but empty" in result.output
    with pytest.raises(sqlq.Error, match="16 characters"):
        DashboardServer(q, "127.0.0.1:0", token="short")


def test_token_guards_every_page(filled: sqlq.Queue) -> None:
    with running(filled, token=TOKEN) as c:
        assert c.get("/").headers["Location"] == "/login"
        assert c.get("/metrics").status == 401
        assert c.get("/api/overview").status == 401
        bearer = {"Authorization": f"Bearer {TOKEN}"}
        assert c.get("/metrics", headers=bearer).status == 200
        assert c.post("/login", {"token": "wrong wrong wrong wrong"}).status == 401
        login = c.post("/login", {"token": TOKEN})
        assert login.status == 303
        cookie = login.headers["Set-Cookie"]
        assert "HttpOnly" in cookie and "SameSite=Strict" in cookie and TOKEN not in cookie
        session = {"Cookie": cookie.split(";")[0]}
        assert c.get("/", headers=session).status == 200
        assert c.get("/", headers={"Cookie": "sqlq_dashboard=forged"}).status == 303
        # Guarded: any Host is fine (the token is what protects a non-loopback bind).
        assert c.get("/", headers={**session, "Host": "queue.internal:8080"}).status == 200


def test_bodies_are_shown_safely() -> None:
    assert show_body(b'{"a": [1, 2]}').kind == "json"
    assert show_body(b'{"a": [1, 2]}').text == '{\n  "a": [\n    1,\n    2\n  ]\n}'
    assert show_body("héllo\nworld".encode()).kind == "text"
    binary = show_body(b"\x00\x01\xff")
    assert binary.kind == "hex" and binary.text.startswith("00000000  00 01 ff")
    cut = show_body(b"x" * 100 + "é".encode(), limit=101)
    assert cut.kind == "text" and cut.cut == 2 and cut.size == 102


def test_periodic_tasks_show_their_next_slot(q: sqlq.Queue) -> None:
    from sqlq.tasks.periodic import Schedule

    with running(q, schedules={"app.tick": Schedule(every=300)}) as c:
        html = c.get("/periodic").text
    assert "app.tick" in html and "every 5m00s" in html and "never" in html
    assert re.search(r"\(in [0-9]+m[0-9]+s\)", html) or "(in " in html


@pytest.mark.slow
def test_idle_dashboard_uses_no_cpu(q: sqlq.Queue) -> None:
    """With no browser open the server sleeps in select: no timer, no polling thread."""
    import os
    import subprocess
    import sys
    import time

    from tests.conftest import ROOT

    proc = forkserver.Popen([sys.executable, "-m", "sqlq", "--db", q.path, "dashboard",
                             "--listen", "127.0.0.1:0"], stderr=subprocess.PIPE, text=True,
                            env=dict(os.environ, PYTHONPATH=str(ROOT)))
    try:
        assert proc.stderr is not None and "on http://" in proc.stderr.readline()

        def cpu_ticks() -> int:
            with open(f"/proc/{proc.pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            return int(fields[11]) + int(fields[12])  # utime + stime

        time.sleep(0.5)
        before = cpu_ticks()
        time.sleep(3)
        assert cpu_ticks() - before <= 1  # clock ticks (1/100 s): nothing ran
    finally:
        proc.terminate()
        assert proc.wait(30) == 0


def test_a_completed_job_shows_its_result(q: sqlq.Queue) -> None:
    q.put("compute", tube="t")
    job = q.reserve("t", timeout=0)
    assert job is not None
    job.complete(b'{"answer": 42}')
    with running(q) as c:
        html = c.get(f"/job?id={job.id}").text
    # Its record (issue 39): done, after one attempt, the body's head, and the result.
    assert '<span class="state done">done</span>' in html and "after 1 attempt" in html
    assert "&#34;answer&#34;: 42" in html and "compute" in html
    with q.transaction() as tx:  # its record pruned: the result alone, as before
        tx.execute("DELETE FROM sqlq_finished")
    with running(q) as c:
        html = c.get(f"/job?id={job.id}").text
    assert "completed" in html and "&#34;answer&#34;: 42" in html and 'id="body"' not in html


def test_a_failed_jobs_page_shows_its_attempts_with_escaped_tracebacks(q: sqlq.Queue) -> None:
    from sqlq.attempts import Attempt

    jid = q.put(b"x", tube="mail")
    for outcome in ("retried", "buried"):
        job = q.reserve("mail", timeout=0)
        assert job is not None
        trace = (f'Traceback (most recent call last):\n  File "/srv/shop.py", line '
                 f'{job.reserves}2, in price\nValueError: {HOSTILE}')
        q.engine.end_attempt(job, Attempt(jid, job.reserves, 1_700_000_000_000, 1.5, "web-1",
                                          77, outcome, "ValueError", f"ValueError: {HOSTILE}",
                                          trace),
                             0 if outcome == "retried" else None)
    with running(q) as client:
        reply = client.get(f"/job?id={jid}")
    assert reply.status == 200
    page = reply.text
    table = page[page.index('id="attempts"'):]
    assert table.count('<pre class="body traceback">') == 2
    assert 'File &#34;/srv/shop.py&#34;, line 12, in price' in table
    assert 'File &#34;/srv/shop.py&#34;, line 22, in price' in table
    assert "retried" in table and "buried" in table and "web-1 pid 77" in table
    assert "2023-11-14 22:13:20Z" in table and "1.5s" in table
    assert HOSTILE not in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in table


def test_a_drained_tube_stays_listed_at_zero(q: sqlq.Queue) -> None:
    """A tube whose workers keep up (no live job), and one whose pause ended, stay in
    the overview and in every per-tube series of /metrics, reading 0."""
    q.put(b"x", tube="media")
    job = q.reserve("media", timeout=0)
    assert job is not None
    job.delete()
    q.pause_tube("thumbs", 0)
    with running(q) as c:
        overview = json.loads(c.get("/api/overview").text)["tubes"]
        assert overview["media"]["live"] == 0 and overview["thumbs"]["ready"] == 0
        assert "media" in c.get("/").text
        text = c.get("/metrics").text
    samples = {(s.name, tuple(sorted(s.labels.items()))): s.value
               for f in text_string_to_metric_families(text) for s in f.samples}
    for tube in ("media", "thumbs"):
        for state in ("ready", "reserved", "delayed", "buried", "waiting"):
            assert samples["sqlq_jobs", (("state", state), ("tube", tube))] == 0
        for name in ("sqlq_jobs_urgent", "sqlq_tube_paused",
                     "sqlq_oldest_ready_job_age_seconds", "sqlq_jobs_buried_total",
                     "sqlq_jobs_kicked_total", "sqlq_jobs_timed_out_total"):
            assert samples[name, (("tube", tube),)] == 0, name
    promtool = require("promtool", "prometheus")
    check = subprocess.run([promtool, "check", "metrics"], input=text, text=True,
                           capture_output=True, timeout=60)
    assert check.returncode == 0, check.stdout + check.stderr


def test_waiting_jobs_and_their_links_on_every_page(q: sqlq.Queue) -> None:
    """Jobs put with after=: counted per tube on the overview, the tube page and
    /metrics, listed in the tube's waiting tab, and each job page links its parents and
    children."""
    a, b = q.put(b"a", tube="mail"), q.put(b"b", tube="mail")
    kids = q.put_many([b"k1", b"k2"], tube="kids", after=a)
    both = q.put(b"both", tube="mail", after=[a, b])
    with running(q) as c:
        api = json.loads(c.get("/api/overview").text)["tubes"]
        assert (api["kids"]["waiting"], api["kids"]["live"], api["kids"]["ready"]) == (2, 2, 0)
        assert api["mail"]["waiting"] == 1
        overview = c.get("/").text
        assert re.search(r'data-field="waiting"><a href="/tube\?name=kids&amp;state=waiting">2<',
                         overview)
        tube = c.get("/tube?name=kids").text
        assert re.search(r'state=waiting"[^>]*>waiting <b data-field="waiting">2</b>', tube)
        listed = c.get("/tube?name=kids&state=waiting").text
        assert all(f'href="/job?id={k}"' in listed for k in kids)
        assert '<span class="state waiting">waiting</span>' in listed
        assert f'href="/job?id={both}"' not in listed  # another tube's
        child = c.get(f"/job?id={both}").text
        assert '<span class="state waiting">waiting</span>' in child
        parents = re.search(r'<td id="parents">(.*?)</td>', child)
        assert parents is not None
        assert re.findall(r'href="/job\?id=(\d+)"', parents.group(1)) == [str(a), str(b)]
        assert 'id="children"' not in child
        parent = c.get(f"/job?id={a}").text
        children = re.search(r'<td id="children">(.*?)</td>', parent)
        assert children is not None
        assert re.findall(r'href="/job\?id=(\d+)"', children.group(1)) == [
            str(i) for i in (*kids, both)]
        plain = c.get(f"/job?id={q.put(b'plain')}").text
        assert 'id="parents"' not in plain and 'id="children"' not in plain
        text = c.get("/metrics").text
        reply = c.post("/actions/delete-job", {"id": str(a), "csrf": c.csrf, "next": "/"})
        assert reply.status == 303
        assert json.loads(c.get("/api/overview").text)["tubes"]["kids"]["ready"] == 2
        assert 'id="parents"' in c.get(f"/job?id={both}").text  # still waits for b
    samples = {(s.name, tuple(sorted(s.labels.items()))): s.value
               for f in text_string_to_metric_families(text) for s in f.samples}
    assert samples["sqlq_jobs", (("state", "waiting"), ("tube", "kids"))] == 2
    assert samples["sqlq_jobs", (("state", "waiting"), ("tube", "mail"))] == 1
    assert samples["sqlq_jobs", (("state", "ready"), ("tube", "kids"))] == 0
    promtool = require("promtool", "prometheus")
    check = subprocess.run([promtool, "check", "metrics"], input=text, text=True,
                           capture_output=True, timeout=60)
    assert check.returncode == 0, check.stdout + check.stderr
