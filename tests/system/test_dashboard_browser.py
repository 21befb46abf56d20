"""The dashboard in a real browser: Debian's headless Chromium driven by Playwright.

The server is the real ``sqlq dashboard`` command in its own process; other processes
work on the same file meanwhile. Each page is saved as a PNG under the test's temporary
directory; with ``SQLQ_SCREENSHOTS=DIR`` the overview and a job page also go to DIR
(that is how docs/images/ is made). Without Chromium these tests FAIL: CI installs it
(.ci/run), and a dashboard nobody looked at is not tested.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import sqlq
from sqlq.attempts import Attempt
from sqlq.core.durations import now_ms
from sqlq.histograms import Tally
from tests import forkserver
from tests.conftest import ROOT, spawn

pytestmark = [pytest.mark.slow,  # a browser per module, a dashboard process
              pytest.mark.xdist_group("browser")]  # one process launches Chromium

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu",
                 "--disable-background-networking", "--disable-component-update",
                 "--disable-sync", "--no-first-run"]
DEADLINE = 60.0  # seconds: generous, the machine is shared
HOSTILE = "<script>alert(1)</script>"
IMG = "<img src=x onerror=\"document.title='pwned'\">"
TRACEBACK = """Traceback (most recent call last):
  File "/srv/app/tasks.py", line 42, in render_report
    pdf = renderer.render(template, data)
  File "/srv/app/renderer.py", line 88, in render
    raise TemplateError(f"missing field {name!r}")
app.renderer.TemplateError: missing field 'invoice_total'"""

FAILED_TRACEBACK = f"""Traceback (most recent call last):
  File "/srv/app/imports.py", line 17, in import_csv
    customer = customers[row["customer"]]
KeyError: '{HOSTILE}'"""
#: The traceparent of a traced failed run (sqlq/core/tracing.py), as its attempt keeps it.
FAILED_TRACE = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"


def _fill(db: str) -> dict[str, int]:
    """A file that looks like a working application's; returns the ids tests act on."""
    q = sqlq.Queue(db, durability="normal")
    ids: dict[str, int] = {}
    q.put_many([json.dumps({"task": "send_email", "to": f"user{i}@example.com",
                            "template": "welcome"}) for i in range(240)], tube="emails")
    q.put_many([json.dumps({"task": "send_email", "to": f"vip{i}@example.com"})
                for i in range(12)], tube="emails", priority=10)
    q.put_many([f"resize /photos/{i}.jpg 256x256" for i in range(60)], tube="thumbs")
    q.put_many([f"resize /photos/late{i}.jpg" for i in range(15)], tube="thumbs", delay=900)
    for i in range(5):
        q.put(json.dumps({"task": "render_report", "invoice": 1000 + i}), tube="reports",
              unique_key=f"invoice-{1000 + i}")
    ids["hostile"] = q.put(HOSTILE, tube="reports")
    ids["img"] = q.put(IMG, tube="reports", unique_key="img-key")
    ids["searched"] = q.put(json.dumps({"task": "render_report", "invoice": 77}),
                            tube="reports", unique_key="invoice-77")
    buried = []
    for _ in range(4):
        job = q.reserve("reports", timeout=0)
        assert job is not None
        job.bury(reason=TRACEBACK)
        buried.append(job.id)
    ids["kick"], ids["delete"], ids["bulk"], ids["csrf"] = buried
    # A task that failed twice under sqlq work: its attempts, as the worker keeps them.
    ids["failed"] = q.put(json.dumps({"task": "import_csv", "file": "orders.csv"}),
                          tube="imports")
    for outcome in ("retried", "buried"):
        job = q.reserve("imports", timeout=0)
        assert job is not None
        q.engine.end_attempt(job, Attempt(job.id, job.reserves, now_ms(), 0.8, "web-1", 4242,
                                          outcome, "KeyError", f"KeyError: '{HOSTILE}'",
                                          FAILED_TRACEBACK,
                                          FAILED_TRACE if outcome == "buried" else None),
                             0 if outcome == "retried" else None)
    q.put("live 0", tube="live")
    # A pipeline: load waits for extract (put with after=).
    ids["extract"] = q.put(json.dumps({"task": "extract", "day": "2026-11-26"}),
                           tube="pipeline")
    ids["load"] = q.put(json.dumps({"task": "load", "day": "2026-11-26"}), tube="pipeline",
                        after=ids["extract"])
    q.subscribe("orders", "billing")
    q.subscribe("orders", "audit")
    q.pause_tube("billing", 3600)
    # What sqlq work workers would have recorded: waits and runs of past jobs.
    tally = Tally()
    for i in range(200):
        tally.observe("emails", "wait", 0.02 + (i % 10) * 0.03 + (1.5 if i % 40 == 0 else 0))
        tally.observe("emails", "run", 0.08 + (i % 7) * 0.02)
        tally.observe("thumbs", "wait", 0.004 + (i % 5) * 0.002)
        tally.observe("thumbs", "run", 0.3 + (i % 9) * 0.15)
    q.record_durations(tally)
    q.close()
    return ids


def _start(db: str, *args: str) -> tuple[subprocess.Popen[str], str]:
    """``sqlq dashboard`` in its own process; its URL, read from its first line."""
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = forkserver.Popen([sys.executable, "-m", "sqlq", "--db", db, "dashboard",
                             "--listen", "127.0.0.1:0", *args],
                            stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True,
                            env=env)
    assert proc.stderr is not None
    line = proc.stderr.readline()
    found = re.search(r"on (http://\S+/)", line)
    if found is None:
        proc.kill()
        pytest.fail(f"sqlq dashboard did not start: {line}{proc.stderr.read()}")
    return proc, found.group(1).rstrip("/")


def _stop(proc: subprocess.Popen[str]) -> None:
    proc.terminate()
    try:
        proc.wait(DEADLINE)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    db = str(tmp_path_factory.mktemp("dashboard") / "app.db")
    ids = _fill(db)
    proc, url = _start(db)
    ro_proc, ro_url = _start(db, "--read-only")
    try:
        yield {"db": db, "ids": ids, "url": url, "read_only_url": ro_url}
    finally:
        _stop(proc)
        _stop(ro_proc)


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    if not os.access(CHROMIUM, os.X_OK):
        pytest.fail(f"{CHROMIUM} is missing: apt-get install chromium (.ci/run does)")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        pytest.fail("playwright is missing: pip install -e '.[test]'")
    with sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            yield chromium
        finally:
            chromium.close()


@pytest.fixture
def page(browser: Any, tmp_path: Path) -> Iterator[Any]:
    context = browser.new_context(viewport={"width": 1280, "height": 800})
    context.set_default_timeout(DEADLINE * 1000)
    page = context.new_page()
    page.dialogs = []  # every alert/confirm seen; confirms are accepted

    def on_dialog(dialog: Any) -> None:
        page.dialogs.append((dialog.type, dialog.message))
        dialog.accept()

    page.on("dialog", on_dialog)
    try:
        yield page
    finally:
        context.close()


def _shot(page: Any, tmp_path: Path, name: str) -> None:
    page.screenshot(path=str(tmp_path / f"{name}.png"), full_page=True)
    docs = os.environ.get("SQLQ_SCREENSHOTS")
    if docs and name in ("overview", "job"):
        page.screenshot(path=str(Path(docs) / f"dashboard-{name}.png"), full_page=False)


def test_overview_counts_follow_another_process(site: dict[str, Any], page: Any,
                                                tmp_path: Path) -> None:
    from playwright.sync_api import expect

    page.goto(site["url"] + "/")
    cell = page.locator('tr[data-tube="live"] [data-field="ready"]')
    expect(cell).to_have_text("1")
    expect(page.locator('tr[data-tube="thumbs"] [data-field="run"]')).to_have_text(
        "≤ 1s · ≤ 2.5s")
    producer = spawn("""
        import sys, sqlq
        with sqlq.Queue(sys.argv[1], durability="normal") as q:
            q.put_many([f"live {i}" for i in range(1, 8)], tube="live")
    """, site["db"])
    assert producer.wait(DEADLINE) == 0
    expect(cell).to_have_text("8")  # no reload: the page polls every 2 s
    spawn("""
        import sys, sqlq
        with sqlq.Queue(sys.argv[1], durability="normal") as q:
            q.put("hello", tube="brand-new")
    """, site["db"]).wait(DEADLINE)
    expect(page.locator("#new-tubes")).to_have_text("1 new tube: reload")
    expect(page.locator("#live")).to_have_class(re.compile(r"\bon\b"))
    # Producers and a worker at work until told to stop, so the rates and the chart
    # have data and the workers card shows the process holding a reservation.
    busy = spawn("""
        import select, sys, time, sqlq
        with sqlq.Queue(sys.argv[1], durability="normal") as q:
            q.reserve("emails", timeout=0)  # held while it runs
            print("ready", flush=True)
            end = time.monotonic() + 60
            while time.monotonic() < end and not select.select([sys.stdin], [], [], 0)[0]:
                q.put_many(["resize /photos/new.jpg"] * 3, tube="thumbs")
                for _ in range(2):
                    job = q.reserve(["emails", "thumbs"], timeout=0)
                    if job is not None:
                        job.delete()
                time.sleep(0.05)
    """, site["db"], stdin=subprocess.PIPE)
    try:
        assert busy.stdout is not None and busy.stdout.readline() == "ready\n"
        page.reload()
        expect(page.locator('[data-live="put-rate"]')).not_to_have_text("—")
        expect(page.locator('[data-live="put-rate"]')).not_to_have_text("0.0")
        if os.environ.get("SQLQ_SCREENSHOTS"):
            page.wait_for_timeout(7000)  # a few polls: the docs' chart spans busy seconds
        _shot(page, tmp_path, "overview")
        for name, path in (("workers", "/workers"), ("periodic", "/periodic"),
                           ("topics", "/topics"), ("tube", "/tube?name=emails")):
            page.goto(site["url"] + path)
            _shot(page, tmp_path, name)
        page.goto(site["url"] + "/workers")
        assert page.locator("table.grid tbody tr").count() == 1  # the busy process
        assert "emails" in page.inner_text("table.grid tbody")
    finally:
        busy.communicate("", timeout=DEADLINE)
    assert page.dialogs == []


def test_kick_and_delete_through_the_ui(site: dict[str, Any], page: Any,
                                        tmp_path: Path) -> None:
    ids = site["ids"]
    page.goto(site["url"] + "/tube?name=reports&state=buried")
    _shot(page, tmp_path, "buried")
    page.click(f'a[href="/job?id={ids["kick"]}"]')
    _shot(page, tmp_path, "job")  # a buried job: its traceback, counters and actions
    page.click('button[data-action="kick-job"]')
    page.wait_for_selector("p.note")
    assert "kicked" in page.inner_text("p.note")
    page.goto(site["url"] + f"/job?id={ids['delete']}")
    page.click('button[data-action="delete-job"]')
    page.wait_for_selector("p.note")
    assert page.dialogs and page.dialogs[-1][0] == "confirm"
    page.goto(site["url"] + "/tube?name=reports&state=buried")
    page.check(f'input[name="ids"][value="{ids["bulk"]}"]')
    page.click('button[data-action="bulk-delete"]')
    page.wait_for_selector("p.note")
    assert "1 of 1 jobs deleted" in page.inner_text("p.note")
    with sqlq.Queue(site["db"], durability="normal") as q:
        kicked = q.peek(ids["kick"])
        assert kicked is not None and kicked.state == "ready"
        assert q.peek(ids["delete"]) is None and q.peek(ids["bulk"]) is None
        assert q.peek(ids["csrf"]) is not None


def test_a_job_page_links_its_parents_and_children(site: dict[str, Any], page: Any,
                                                   tmp_path: Path) -> None:
    from playwright.sync_api import expect

    ids = site["ids"]
    page.goto(site["url"] + "/tube?name=pipeline&state=waiting")
    expect(page.locator('nav.tabs [data-field="waiting"]')).to_have_text("1")
    page.click(f'table.jobs a[href="/job?id={ids["load"]}"]')
    expect(page.locator("h1 .state")).to_have_text("waiting")
    _shot(page, tmp_path, "job-waiting")
    page.click(f'#parents a[href="/job?id={ids["extract"]}"]')
    expect(page.locator("h1")).to_contain_text(f"Job {ids['extract']}")
    expect(page.locator("h1 .state")).to_have_text("ready")
    assert page.locator("#parents").count() == 0
    page.click(f'#children a[href="/job?id={ids["load"]}"]')
    expect(page.locator("h1")).to_contain_text(f"Job {ids['load']}")
    page.goto(site["url"] + "/")
    expect(page.locator('tr[data-tube="pipeline"] [data-field="waiting"]')).to_have_text("1")


def test_search_finds_a_job(site: dict[str, Any], page: Any, tmp_path: Path) -> None:
    page.goto(site["url"] + "/tube?name=reports")
    page.fill('input[name="q"]', "invoice-77")
    page.press('input[name="q"]', "Enter")
    page.wait_for_selector(f'a[href="/job?id={site["ids"]["searched"]}"]')
    _shot(page, tmp_path, "search")
    page.click(f'a[href="/job?id={site["ids"]["searched"]}"]')
    assert '"invoice": 77' in page.inner_text("#body")
    _shot(page, tmp_path, "job-json")


def test_a_failed_jobs_attempts_show_the_latest_traceback(site: dict[str, Any], page: Any,
                                                         tmp_path: Path) -> None:
    page.goto(site["url"] + f"/job?id={site['ids']['failed']}")
    assert page.locator("#attempts > tbody > tr:not(.traceback)").count() == 2
    shown = page.locator("#attempts details[open] pre")  # the latest one is unfolded
    assert shown.count() == 1 and shown.inner_text() == FAILED_TRACEBACK
    assert page.locator("#attempts details:not([open])").count() == 1
    # Each run's OpenTelemetry trace id (an untraced one: a dash), to find it in a tracing UI.
    assert page.locator("#attempts code.trace").all_inner_texts() == [FAILED_TRACE.split("-")[1]]
    assert page.locator("main img, main script").count() == 0
    _shot(page, tmp_path, "job-attempts")


def test_hostile_bodies_stay_text(site: dict[str, Any], page: Any, tmp_path: Path) -> None:
    for key, text in (("hostile", HOSTILE), ("img", IMG)):
        page.goto(site["url"] + f"/job?id={site['ids'][key]}")
        assert page.inner_text("#body") == text
        assert page.locator("main img, main script").count() == 0
        _shot(page, tmp_path, f"hostile-{key}")
    page.goto(site["url"] + "/tube?name=reports&q=img")
    assert IMG in page.inner_text("table.jobs")
    page.wait_for_timeout(500)
    assert page.dialogs == [] and page.title() != "pwned"


def test_an_action_without_the_csrf_token_is_refused(site: dict[str, Any], page: Any) -> None:
    job_id = site["ids"]["csrf"]
    page.goto(site["url"] + f"/job?id={job_id}")
    status = page.evaluate("""async (id) => {
        const body = new URLSearchParams({id: String(id), next: "/"});
        const resp = await fetch("/actions/delete-job", {method: "POST", body});
        return resp.status;
    }""", job_id)
    assert status == 403
    # The page's own form, with its token taken out, is refused the same way.
    page.evaluate("document.querySelector('form[action=\"/actions/kick-job\"] "
                  "input[name=csrf]').remove()")
    page.click('button[data-action="kick-job"]')
    page.wait_for_selector("p.error")
    assert "CSRF" in page.inner_text("p.error")
    with sqlq.Queue(site["db"], durability="normal") as q:
        job = q.peek(job_id)
        assert job is not None and job.state == "buried"


def test_read_only_shows_no_action(site: dict[str, Any], page: Any, tmp_path: Path) -> None:
    base = site["read_only_url"]
    for path in ("/", "/tube?name=reports&state=buried", f"/job?id={site['ids']['csrf']}",
                 "/tube?name=emails"):
        page.goto(base + path)
        assert page.locator("form[method=post]").count() == 0, path
        assert page.locator("[data-action]").count() == 0, path
        assert page.locator('input[name="ids"]').count() == 0, path
        assert "read-only" in page.inner_text("header")
    _shot(page, tmp_path, "read-only")
