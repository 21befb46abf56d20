"""The dashboard's tube page shows a tube's limits and sets them (sqlq/core/limits.py)."""

from __future__ import annotations

import sqlq
from tests.dashboard_client import running


def test_the_tube_page_shows_and_sets_limits(q: sqlq.Queue) -> None:
    q.put(b"x", tube="mail")
    q.limit("mail", concurrency=3)
    with running(q) as client:
        page = client.get("/tube?name=mail").text
        assert "concurrency 3" in page and "no rate" in page
        base = {"csrf": client.csrf, "tube": "mail", "next": "/tube?name=mail"}
        reply = client.post("/actions/limit", {**base, "concurrency": "2", "rate": "20/s"})
        assert reply.status == 303
        assert q.limits() == {"mail": {"concurrency": 2, "rate": (20, 1.0)}}
        assert "rate 20/s" in client.get("/tube?name=mail").text
        assert client.post("/actions/limit", {**base, "concurrency": "0", "rate": ""}
                           ).status == 400  # a bad value changes nothing
        assert q.limits() == {"mail": {"concurrency": 2, "rate": (20, 1.0)}}
        assert client.post("/actions/limit", {**base, "concurrency": "", "rate": ""}
                           ).status == 303  # empty fields: no limits
        assert q.limits() == {}
    with running(q, read_only=True) as client:
        assert "/actions/limit" not in client.get("/tube?name=mail").text


def test_the_tube_page_shows_the_busiest_groups_and_a_job_its_group(q: sqlq.Queue) -> None:
    q.put_many([b"a"] * 3, tube="syncs", group="acct-1")
    jid = q.put(b"b", tube="syncs", group="acct-2")
    q.put(b"c", tube="syncs")
    q.limit("syncs", group_concurrency=2)
    held = q.reserve("syncs", timeout=0)
    assert held is not None and held.group == "acct-1"
    with running(q) as client:
        page = client.get("/tube?name=syncs").text
        assert "Busiest groups" in page and "group concurrency 2" in page
        rows = page[page.index("Busiest groups"):page.index("</table>")]
        assert rows.index("acct-1") < rows.index("acct-2")  # 2 ready + 1 reserved first
        assert "<td>acct-1</td><td>2</td><td>1</td>" in rows
        assert "<td>acct-2</td><td>1</td><td>0</td>" in rows
        assert "acct-2" in client.get(f"/job?id={jid}").text
        metrics = client.get("/metrics").text
        assert "acct-1" not in metrics  # no series per group
        assert "Busiest groups" not in client.get("/tube?name=other").text
