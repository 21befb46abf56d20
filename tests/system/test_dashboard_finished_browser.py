"""The dashboard's Done and Cancelled lists and a finished job's page (issue 39), in
Debian's headless Chromium through Playwright, against the real ``sqlq dashboard``
process (the fixtures of test_dashboard_browser.py)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import sqlq
from tests.system.test_dashboard_browser import _shot, _start, _stop, browser, page

pytestmark = [pytest.mark.slow,  # a browser, a dashboard process
              pytest.mark.xdist_group("browser")]  # one process launches Chromium

__all__ = ["browser", "page"]  # the fixtures, used by name

DONE = 60  # more than a page (PAGE = 50)


def _fill(db: str) -> dict[str, Any]:
    with sqlq.Queue(db, durability="normal") as q:
        ids = q.put_many([json.dumps({"task": "ship", "order": 5000 + i}) for i in range(DONE)],
                         tube="orders")
        keyed = q.put(json.dumps({"task": "ship", "order": 4711}), tube="orders",
                      unique_key="order-4711")
        for job in q.reserve_many(DONE + 1, tubes="orders", timeout=0):
            job.delete()
        running = q.put(json.dumps({"task": "ship", "order": 9999}), tube="orders")
        held = q.reserve("orders", timeout=0)
        assert held is not None and held.id == running
        return {"done": ids, "keyed": keyed, "running": running, "held": held}


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    db = str(tmp_path_factory.mktemp("finished") / "app.db")
    ids = _fill(db)
    proc, url = _start(db)
    try:
        yield {"db": db, "ids": ids, "url": url}
    finally:
        _stop(proc)


def test_the_done_list_pages_searches_and_opens_a_record(site: dict[str, Any], page: Any,
                                                         tmp_path: Path) -> None:
    from playwright.sync_api import expect

    ids = site["ids"]
    page.goto(site["url"] + "/tube?name=orders")
    page.click('nav.tabs a[data-list="done"]')
    rows = page.locator("#ended tbody tr")
    expect(rows).to_have_count(50)
    expect(rows.first).to_contain_text(str(ids["keyed"]))  # newest first
    _shot(page, tmp_path, "done-list")
    page.click('a[rel="next"]')
    expect(rows).to_have_count(DONE + 1 - 50)
    expect(page.locator("#ended")).to_contain_text(str(ids["done"][0]))
    # By unique key, body text and id (an id also matches bodies that hold its digits:
    # the keyed job's, 61, is in no other body).
    for text, found in (("order-4711", ids["keyed"]), ('"order": 5003', ids["done"][3]),
                        (str(ids["keyed"]), ids["keyed"]), ("no such text", None)):
        page.fill('input[name="q"]', text)
        page.press('input[name="q"]', "Enter")
        expect(page.locator("h2")).to_contain_text(text)
        expect(rows).to_have_count(1)
        if found is None:
            expect(rows.first).to_contain_text("No matching done jobs kept.")
        else:
            expect(rows.first.locator("td").first).to_have_text(str(found))
    page.fill('input[name="q"]', '"order": 5003')
    page.press('input[name="q"]', "Enter")
    page.click(f'#ended a[href="/job?id={ids["done"][3]}"]')
    expect(page.locator("h1 .state")).to_have_text("done")
    expect(page.locator("#ended")).to_contain_text("after 1 attempt")
    expect(page.locator("#body")).to_contain_text('"order": 5003')
    _shot(page, tmp_path, "finished-job")


def test_a_job_cancelled_in_the_dashboard_is_listed_as_such(site: dict[str, Any], page: Any,
                                                            tmp_path: Path) -> None:
    from playwright.sync_api import expect

    running = site["ids"]["running"]
    page.goto(site["url"] + f"/job?id={running}")
    page.click('button[data-action="cancel-job"]')
    page.wait_for_selector("p.note")
    page.goto(site["url"] + "/tube?name=orders&state=cancelled")
    rows = page.locator("#ended tbody tr")
    expect(rows).to_have_count(1)
    expect(rows.first).to_contain_text("cancelled by dashboard")
    page.click(f'#ended a[href="/job?id={running}"]')
    expect(page.locator("#ended")).to_contain_text("by the dashboard")
    _shot(page, tmp_path, "cancelled-job")
    with sqlq.Queue(site["db"], durability="normal") as q:
        assert q.peek(running) is None
        record = q.finished(running)
        assert record is not None and (record.outcome, record.by) == ("cancelled", "dashboard")
