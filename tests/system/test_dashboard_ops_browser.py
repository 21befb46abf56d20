"""The operators' pages (issue 26) in a real browser: the Failed page retrying a whole
group, the Workers page showing an idle ``sqlq work`` process, and logging out. The
server is the real ``sqlq dashboard`` command; Chromium and the fixtures are those of
test_dashboard_browser.py (without Chromium these tests FAIL, as those do)."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import sqlq
from sqlq.attempts import Attempt
from sqlq.core.durations import now_ms
from tests.system import test_dashboard_browser as shared
from tests.system.test_dashboard_browser import DEADLINE, _start, _stop
from tests.workers import Work, wait_for

# The browser and a page per test, with confirmations accepted and recorded.
browser = shared.browser
page = shared.page

pytestmark = [pytest.mark.slow,  # a browser per module, dashboard and worker processes
              pytest.mark.xdist_group("browser")]  # one process launches Chromium

HOSTILE = "<script>alert(1)</script>"


def _fill(db: str) -> dict[str, list[int]]:
    """Jobs buried by sqlq work after a KeyError in two tubes, and one buried by hand."""
    ids: dict[str, list[int]] = {"key": [], "hand": []}
    with sqlq.Queue(db, durability="normal") as q:
        for tube in ("imports", "exports"):
            for i in range(2):
                q.put(json.dumps({"task": "import_csv", "n": i}), tube=tube)
                job = q.reserve(tube, timeout=0)
                assert job is not None
                q.engine.end_attempt(job, Attempt(
                    job.id, job.reserves, now_ms(), 0.2, "web-1", 4242, "buried", "KeyError",
                    f"KeyError: '{HOSTILE}'", "Traceback ...\nKeyError"), None)
                ids["key"].append(job.id)
        q.put("corrupt.jpg", tube="thumbs")
        job = q.reserve("thumbs", timeout=0)
        assert job is not None
        job.bury(reason="corrupt image")
        ids["hand"].append(job.id)
    return ids


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    db = str(tmp_path_factory.mktemp("dashboard-ops") / "app.db")
    ids = _fill(db)
    proc, url = _start(db)
    try:
        yield {"db": db, "ids": ids, "url": url}
    finally:
        _stop(proc)


def test_a_failed_group_is_retried_from_the_failed_page(site: dict[str, Any], page: Any,
                                                        tmp_path: Path) -> None:
    from playwright.sync_api import expect

    page.goto(site["url"] + "/failed")
    rows = page.locator("#failed tbody tr")
    expect(rows).to_have_count(2)
    first, second = rows.nth(0), rows.nth(1)
    expect(first).to_contain_text("corrupt image")  # the newest group first
    expect(second).to_contain_text(f"KeyError: '{HOSTILE}'")  # as text, never as HTML
    expect(second.locator('[data-field="jobs"]')).to_have_text("4")
    expect(second).to_contain_text("exports")
    expect(second).to_contain_text("imports")
    page.screenshot(path=str(tmp_path / "failed.png"), full_page=True)
    second.locator('button[data-action="group"]', has_text="Retry all").click()
    expect(page.locator("p.note")).to_have_text("4 of 4 jobs kicked")
    assert page.dialogs and page.dialogs[-1] == ("confirm",
                                                 "Kick the 4 jobs of this group back to ready?")
    expect(rows).to_have_count(1)
    expect(rows.nth(0)).to_contain_text("corrupt image")
    with sqlq.Queue(site["db"], durability="normal") as q:
        assert all(q.peek(i).state == "ready" for i in site["ids"]["key"])  # type: ignore[union-attr]
        assert q.peek(site["ids"]["hand"][0]).state == "buried"  # type: ignore[union-attr]


def test_the_workers_page_shows_an_idle_worker(site: dict[str, Any], page: Any,
                                               tmp_path: Path) -> None:
    from playwright.sync_api import expect

    with Work(site["db"], "--in-process", "--tube", "quiet", "--", "true") as worker:
        with sqlq.Queue(site["db"], durability="normal") as q:  # registered when it starts
            wait_for(lambda: [w.pid for w in q.workers()] == [worker.pid], DEADLINE,
                     "the worker's row")
        page.goto(site["url"] + "/workers")
        row = page.locator(f'#workers tr[data-pid="{worker.pid}"]')
        expect(row).to_have_count(1)
        expect(row.locator('[data-field="running"]')).to_have_text("idle")
        expect(row.locator('[data-field="done"]')).to_have_text("0")
        expect(row).to_contain_text("quiet")
        page.screenshot(path=str(tmp_path / "workers.png"), full_page=True)
        page.goto(site["url"] + "/")
        expect(page.locator('a[href="/workers"]').last).to_have_text("1")
        assert worker.stop() == 0
    page.goto(site["url"] + "/workers")
    expect(page.locator("#workers tbody")).to_contain_text("No sqlq work process runs")


def test_login_returns_to_the_page_asked_for_and_logout_ends_the_session(
        site: dict[str, Any], page: Any, tmp_path: Path) -> None:
    from playwright.sync_api import expect

    token_file = tmp_path / "token"
    token_file.write_text("correct horse battery staple\n")
    proc, url = _start(site["db"], "--token-file", str(token_file))
    try:
        page.goto(url + "/tube?name=thumbs&state=buried")
        expect(page).to_have_url(re.compile(r"/login\?next="))
        page.fill('input[name="token"]', "correct horse battery staple")
        page.click('form.login button[type="submit"]')
        expect(page).to_have_url(url + "/tube?name=thumbs&state=buried")  # where we asked
        expect(page.locator("h1")).to_contain_text("thumbs")
        page.click('button[data-action="logout"]')
        expect(page).to_have_url(url + "/login")
        assert page.context.cookies() == []  # the session cookie is gone
        page.goto(url + "/failed")
        expect(page).to_have_url(url + "/login?next=%2Ffailed")  # logged out for good
    finally:
        _stop(proc)
