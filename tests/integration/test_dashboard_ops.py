"""The operators' pages and rules (issue 26) over real HTTP, on both backends: failed jobs
grouped by error with a group's retry and delete, the audit log's tubes and ids, logout,
and login returning to the page asked for (never to another site)."""

from __future__ import annotations

import re
import sys
from urllib.parse import urlencode

import pytest

import sqlq
from sqlq.attempts import MESSAGE_LIMIT, Attempt
from sqlq.core.durations import now_ms
from sqlq.dashboard.views import group_key
from tests import forkserver
from tests.dashboard_client import Client, running
from tests.workers import ROOT

TOKEN = "correct horse battery staple"
HOSTILE = "<script>alert(1)</script>"


def _fail(q: sqlq.Queue, tube: str, error: str, message: str, count: int) -> list[int]:
    """Put ``count`` jobs in ``tube`` and bury each as sqlq work would after a failed run."""
    ids = q.put_many([f"{tube} {i}" for i in range(count)], tube=tube)
    for _ in ids:
        job = q.reserve(tube, timeout=0)
        assert job is not None
        q.engine.end_attempt(job, Attempt(job.id, job.reserves, now_ms(), 0.1, "web-1", 42,
                                          "buried", error, message, "Traceback ..."), None)
    return ids


@pytest.fixture
def failed(q: sqlq.Queue) -> dict[str, list[int]]:
    """Three groups: a KeyError in two tubes, a TypeError, and jobs buried by hand."""
    ids = {"key": _fail(q, "mail", "KeyError", "KeyError: 'sku'", 3)}
    ids["key"] += _fail(q, "bill", "KeyError", "KeyError: 'sku'", 2)
    ids["type"] = _fail(q, "bill", "TypeError", f"TypeError: {HOSTILE}", 1)
    ids["hand"] = q.put_many([b"a", b"b"], tube="mail")
    for _ in ids["hand"]:
        job = q.reserve("mail", timeout=0)
        assert job is not None
        job.bury(reason="corrupt image\nsecond line")
    q.put(b"ready, not failed", tube="mail")
    return ids


def test_failed_groups_are_grouped_by_error_newest_first(q: sqlq.Queue,
                                                        failed: dict[str, list[int]]) -> None:
    groups = q.failed_groups()
    assert [(g.error, g.reason, g.jobs, g.tubes) for g in groups] == [
        ("", "corrupt image\nsecond line", 2, ["mail"]),
        ("TypeError", f"TypeError: {HOSTILE}", 1, ["bill"]),
        ("KeyError", "KeyError: 'sku'", 5, ["bill", "mail"]),
    ]
    assert groups[0].newest_id == max(failed["hand"])
    assert [g.error for g in q.failed_groups(limit=1, offset=1)] == ["TypeError"]
    assert q.failed_groups(offset=3) == []
    assert [i for i, _ in q.failed_group_jobs("KeyError", "KeyError: 'sku'")] == failed["key"]
    assert q.failed_group_jobs("KeyError", "other") == []
    with pytest.raises(ValueError):
        q.failed_groups(limit=0)


def test_failed_page_retries_and_deletes_a_whole_group(q: sqlq.Queue,
                                                       failed: dict[str, list[int]],
                                                       capfd: pytest.CaptureFixture[str]
                                                       ) -> None:
    with running(q) as client:
        page = client.get("/failed")
        assert page.status == 200
        assert "KeyError" in page.text and "corrupt image" in page.text
        assert HOSTILE not in page.text and "&lt;script&gt;" in page.text
        assert re.search(r'data-field="jobs">5<', page.text)
        key = group_key("KeyError", "KeyError: 'sku'")
        unconfirmed = client.post("/actions/group", {"csrf": client.csrf, "key": key,
                                                     "verb": "kick", "next": "/failed"})
        assert unconfirmed.status == 303 and "confirm" in unconfirmed.headers["Location"]
        assert all(q.peek(i).state == "buried" for i in failed["key"])  # type: ignore[union-attr]
        assert client.post("/actions/group", {"key": key, "verb": "kick",
                                               "confirm": "yes"}).status == 403  # no CSRF
        done = client.post("/actions/group", {"csrf": client.csrf, "key": key, "verb": "kick",
                                              "confirm": "yes", "next": "/failed"})
        assert done.status == 303 and done.headers["Location"].startswith("/failed?note=5+of+5")
        assert all(q.peek(i).state == "ready" for i in failed["key"])  # type: ignore[union-attr]
        hand = group_key("", "corrupt image\nsecond line")
        client.post("/actions/group", {"csrf": client.csrf, "key": hand, "verb": "delete",
                                       "confirm": "yes", "next": "/failed"})
        assert all(q.peek(i) is None for i in failed["hand"])
        assert [g.error for g in q.failed_groups()] == ["TypeError"]
        assert client.post("/actions/group", {"csrf": client.csrf, "key": "!!", "verb": "kick",
                                              "confirm": "yes"}).status == 400
    audit = [line for line in capfd.readouterr().err.splitlines()
             if line.startswith("sqlq dashboard:")]
    assert audit[-2].endswith("group: 5 of 5 jobs kicked; tube bill,mail; jobs "
                              + ",".join(map(str, failed["key"])))
    assert audit[-1].endswith("group: 2 of 2 jobs deleted; tube mail; jobs "
                              + ",".join(map(str, failed["hand"])))


def test_audit_lines_name_the_tube_and_the_jobs(q: sqlq.Queue,
                                                capfd: pytest.CaptureFixture[str]) -> None:
    ids = q.put_many([b"a", b"b", b"c"], tube="mail")
    for _ in ids:
        job = q.reserve("mail", timeout=0)
        assert job is not None
        job.bury()
    with running(q) as client:
        client.post("/actions/kick-job", {"csrf": client.csrf, "id": ids[0]})
        client.post("/actions/bulk", {"csrf": client.csrf, "ids": [ids[1], 999999],
                                      "verb": "delete", "confirm": "yes"})
        client.post("/actions/kick-all", {"csrf": client.csrf, "tube": "mail",
                                          "confirm": "yes"})
        client.post("/actions/pause", {"csrf": client.csrf, "tube": "mail", "duration": "1m"})
    audit = [line.split(" ", 3) for line in capfd.readouterr().err.splitlines()
             if line.startswith("sqlq dashboard:")]
    assert all(re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", at) for _, _, at, _ in audit)
    assert [rest.split(" ", 1)[1] for _, _, _, rest in audit] == [
        f"kick-job: job {ids[0]} kicked; tube mail; jobs {ids[0]}",
        f"bulk: 1 of 2 jobs deleted; tube mail; jobs {ids[1]}",
        f"kick-all: 1 jobs kicked; tube mail; jobs {ids[2]}",
        "pause: tube paused for 1m00s; tube mail",
    ]


def _login(client: Client, next_: str | None = None) -> tuple[int, str, str]:
    form = {"token": TOKEN} if next_ is None else {"token": TOKEN, "next": next_}
    reply = client.post("/login", form)
    return reply.status, reply.headers.get("Location", ""), reply.headers.get("Set-Cookie", "")


def test_login_returns_to_the_page_asked_for_and_logout_ends_the_session(
        q: sqlq.Queue) -> None:
    with running(q, token=TOKEN) as client:
        asked = client.get("/tube?name=mail&state=buried")
        assert asked.status == 303
        assert asked.headers["Location"] == "/login?next=%2Ftube%3Fname%3Dmail%26state%3Dburied"
        form = client.get(asked.headers["Location"]).text
        assert 'name="next" value="/tube?name=mail&amp;state=buried"' in form
        status, location, cookie = _login(client, "/tube?name=mail&state=buried")
        assert (status, location) == (303, "/tube?name=mail&state=buried")
        session = {"Cookie": cookie.split(";")[0]}
        assert client.get("/workers", headers=session).status == 200
        page = client.get("/workers", headers=session).text
        assert 'action="/logout"' in page
        csrf = client.csrf
        assert client.post("/logout", {}, headers=session).status == 403  # no CSRF: refused
        out = client.post("/logout", {"csrf": csrf}, headers=session)
        assert out.status == 303 and out.headers["Location"] == "/login"
        assert "Max-Age=0" in out.headers["Set-Cookie"]
        assert out.headers["Set-Cookie"].startswith("sqlq_dashboard=;")


@pytest.mark.parametrize("target", ["//evil.example/", "/\\evil.example", "https://evil.example/",
                                    "javascript:alert(1)", "/ok\r\nSet-Cookie: x=1", ""])
def test_login_never_returns_to_another_site(q: sqlq.Queue, target: str) -> None:
    with running(q, token=TOKEN) as client:
        status, location, _ = _login(client, target)
        assert (status, location) == (303, "/")
        form = client.get("/login?" + urlencode({"next": target})).text
        assert "evil.example" not in form


def test_a_large_group_goes_a_step_per_click_and_a_delete_spares_jobs_moved_since(
        q: sqlq.Queue, failed: dict[str, list[int]], monkeypatch: pytest.MonkeyPatch) -> None:
    from sqlq.dashboard import routes

    monkeypatch.setattr(routes, "GROUP_STEP", 2)
    key = group_key("KeyError", "KeyError: 'sku'")
    with running(q) as client:
        form = {"csrf": client.csrf, "key": key, "verb": "kick", "confirm": "yes",
                "next": "/failed"}
        first = client.post("/actions/group", form)
        assert "2+of+2+jobs+kicked+%283+more+in+this+group" in first.headers["Location"]
        assert [q.peek(i).state for i in failed["key"]] == [  # type: ignore[union-attr]
            "ready", "ready", "buried", "buried", "buried"]  # the oldest first
        client.post("/actions/group", form)
        client.post("/actions/group", form)
        assert all(q.peek(i).state == "ready" for i in failed["key"])  # type: ignore[union-attr]
        # A job kicked after the group was read is not deleted with it.
        kicked = failed["hand"][0]
        q.kick_job(kicked)
        done = client.server.dashboard._each("delete", [(kicked, "mail"),
                                                        (failed["hand"][1], "mail")],
                                             buried_only=True)
        assert (done.note, done.ids) == ("1 of 2 jobs deleted", [failed["hand"][1]])
        assert q.peek(kicked) is not None


def test_a_huge_bury_reason_is_capped_and_its_group_can_still_be_retried(
        q: sqlq.Queue, db_url: str) -> None:
    """Web check F-3: a 640 KB bury reason made /failed 3.6 MB and its Retry all answer
    413. A reason is now kept as an attempt's message is (MESSAGE_LIMIT: its start, a
    marker, its end), whoever gives it: Job.bury, a worker's failure, ``sqlq bury``."""
    huge = "<script>alert('bury')</script>\n" * 20_000  # 640 KB
    by_hand, by_cli, by_worker = q.put_many([b"a", b"b", b"c"], tube="big")
    job = q.reserve("big", timeout=0)
    assert job is not None and job.id == by_hand
    job.bury(reason=huge)
    assert job.bury_reason is not None and len(job.bury_reason) <= MESSAGE_LIMIT
    assert q.reserve("big", timeout=0) is not None
    cli = forkserver.run([sys.executable, "-m", "sqlq", "--db", db_url, "bury", str(by_cli),
                          "--reason", "y" * 100_000 + " END"],  # an argument's limit: 128 KiB
                         capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert cli.returncode == 0, cli.stderr
    worker_job = q.reserve("big", timeout=0)
    assert worker_job is not None
    q.engine.end_attempt(worker_job, Attempt(worker_job.id, 1, now_ms(), 0.1, "web-1", 42,
                                             "buried", "ValueError", huge, "Traceback ..."),
                         None)
    for jid in (by_hand, by_cli, by_worker):
        reason = q.peek(jid).bury_reason  # type: ignore[union-attr]
        assert reason is not None and len(reason) <= MESSAGE_LIMIT, jid
        assert "characters left out ...]" in reason
    assert q.peek(by_cli).bury_reason.endswith(" END")  # type: ignore[union-attr]
    with running(q) as client:
        page = client.get("/failed").text
        assert len(page) < 40_000
        keys = re.findall(r'data-group="([^"]+)"', page)
        assert len(keys) == 3 and all(len(k) < 8 * MESSAGE_LIMIT for k in keys)
        for key in keys:
            done = client.post("/actions/group", {"csrf": client.csrf, "key": key,
                                                  "verb": "kick", "confirm": "yes",
                                                  "next": "/failed"})
            assert done.status == 303 and "1+of+1+jobs+kicked" in done.headers["Location"]
        assert len(client.get(f"/job?id={by_hand}").text) < 80_000
    assert all(q.peek(i).state == "ready" for i in (by_hand, by_cli, by_worker))  # type: ignore[union-attr]


def test_an_audit_line_counts_the_jobs_it_does_not_list() -> None:
    from sqlq.dashboard.routes import Done

    assert Done("700 jobs kicked", ["t", "t"], [1, 2], 698).audit() == \
        "700 jobs kicked; tube t; jobs 1,2 and 698 more"
    assert Done("tube resumed", ["t"]).audit() == "tube resumed; tube t"
