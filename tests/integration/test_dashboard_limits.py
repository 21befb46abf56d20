"""The dashboard's tube page shows a tube's limits and sets them (sqlq/limits.py)."""

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
