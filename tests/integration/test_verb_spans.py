"""Every verb under its span when tracing is on (issue 35): the dispatcher
(sqlq/verbs/dispatch.py) gives each verb the messaging conventions' span (``send`` for
puts, ``receive`` for claims, ``settle`` for acknowledgements) or one named by the verb,
on both backends, through the Queue and a Job handle alike. A process of its own: the
SDK's tracer provider is set once per process (tests/otel_spans.py)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

import sqlq
from tests import otel_spans
from tests.conftest import spawn

pytestmark = pytest.mark.timeout(90)

#: One call of each verb, in order; prints nothing (the spans are the output).
VERBS = """
import sys
import tests.otel_spans
import sqlq

with sqlq.Queue(sys.argv[1]) as q:
    a = q.put(b"a", tube="spans")
    q.put_many([b"b", b"c"], tube="spans")
    q.subscribe("news", "spans")
    q.limit("capped", concurrency=2)
    q.pause_tube("paused", 60)
    q.publish("news", b"d")
    job = q.reserve("spans", timeout=0)
    job.touch()
    job.progress(0.5)
    job.release()
    job = q.reserve("spans", timeout=0)
    job.bury(reason="later")
    q.kick_job(job.id)
    q.kick(10, "spans")
    job = q.reserve("spans", timeout=0)
    job.complete(b"done")
    q.result(job.id, timeout=0)  # a waiter's look: no span
    q.limits()
    jobs = q.reserve_many(2, "spans", timeout=0)
    q.delete_many(jobs)
    last = q.reserve_job(q.put(b"e", tube="spans"))
    last.delete()
    q.cancel(q.put(b"f", tube="spans"))
"""


@pytest.fixture
def spans(db_url: str, tmp_path: Path) -> list[dict[str, Any]]:
    sqlq.Queue(db_url).close()
    directory = tmp_path / "spans"
    directory.mkdir()
    env = {k: v for k, v in os.environ.items() if k != "SQLQ_DB"}
    proc = spawn(VERBS, db_url, env=dict(env, SQLQ_TEST_SPANS=str(directory)))
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    return otel_spans.read(directory)


def _operation(span: dict[str, Any]) -> tuple[str, str | None, str]:
    attributes = span["attributes"]
    return (attributes["messaging.operation.name"],
            attributes.get("messaging.operation.type"), span["kind"])


def test_every_verb_has_its_span(spans: list[dict[str, Any]]) -> None:
    found = [_operation(span) for span in spans]
    assert found == [
        ("put", "send", "PRODUCER"), ("put_many", "send", "PRODUCER"),
        ("subscribe", None, "INTERNAL"), ("limit", None, "INTERNAL"),
        ("pause_tube", None, "INTERNAL"), ("publish", "send", "PRODUCER"),
        ("reserve", "receive", "CLIENT"), ("touch", "settle", "CLIENT"),
        ("progress", None, "INTERNAL"), ("release", "settle", "CLIENT"),
        ("reserve", "receive", "CLIENT"), ("bury", "settle", "CLIENT"),
        ("kick_job", None, "INTERNAL"), ("kick", None, "INTERNAL"),
        ("reserve", "receive", "CLIENT"), ("complete", "settle", "CLIENT"),
        ("limits", None, "INTERNAL"),
        ("reserve", "receive", "CLIENT"), ("delete_many", "settle", "CLIENT"),
        ("put", "send", "PRODUCER"), ("reserve_job", "receive", "CLIENT"),
        ("delete", "settle", "CLIENT"),
        ("put", "send", "PRODUCER"), ("cancel", None, "INTERNAL"),
        ("give_back", None, "INTERNAL"),  # the Queue's close
    ], json.dumps(spans, indent=1)[:4000]
    assert all(span["attributes"]["messaging.system"] == "sqlq" for span in spans)


def test_spans_name_the_tube_and_the_job(spans: list[dict[str, Any]]) -> None:
    by_name: dict[str, list[dict[str, Any]]] = {}
    for span in spans:
        by_name.setdefault(span["attributes"]["messaging.operation.name"], []).append(span)
    put = by_name["put"][0]
    assert put["name"] == "send spans"
    assert put["attributes"]["messaging.destination.name"] == "spans"
    first_id = put["attributes"]["messaging.message.id"]
    assert by_name["put_many"][0]["attributes"]["messaging.batch.message_count"] == 2
    assert by_name["publish"][0]["name"] == "send news"
    claim = by_name["reserve"][0]
    assert claim["name"] == "receive spans"
    assert claim["attributes"]["messaging.message.id"] == first_id
    touch = by_name["touch"][0]
    assert touch["attributes"]["messaging.message.id"] == first_id
    assert by_name["delete"][0]["name"] == "settle spans"  # the handle's tube
    # A settle that learns no tube (SQLite's worker's delete returns none) has no name
    # ending in a blank: its destination is not said rather than ''.
    assert not [s["name"] for s in spans if s["name"].endswith(" ")]
    assert all(s["attributes"].get("messaging.destination.name", "x") for s in spans)
    assert by_name["reserve"][-1]["attributes"]["messaging.batch.message_count"] == 2
    assert by_name["kick"][0]["name"] == "kick spans"
    assert by_name["subscribe"][0]["name"] == "subscribe news"  # the topic
    assert by_name["limit"][0]["name"] == "limit capped"
    assert by_name["pause_tube"][0]["name"] == "pause_tube paused"
    assert all(span["status"] == "UNSET" for span in spans)
