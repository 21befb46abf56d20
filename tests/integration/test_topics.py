"""Fan-out: publish puts one copy per subscribed tube, atomically; subscribers pull.

The tests that start other processes, moved from tests/unit/test_topics.py
(which keeps the in-process ones)."""

from __future__ import annotations

import json

import pytest

import sqlq
from tests.conftest import spawn
from tests.unit.test_topics import drain

# q and fq: as a Queue, then as an AsyncQueue
pytestmark = [pytest.mark.both_apis, pytest.mark.sql_ascii]


SUBSCRIBER = """
import json, sys, sqlq
q = sqlq.Queue(sys.argv[1], durability="normal")
bodies = []
while (job := q.reserve("audit", timeout=0)) is not None:
    bodies.append(job.body.decode())
    job.delete()
q.close()
print(json.dumps(bodies))
"""


def test_a_subscriber_that_was_down_gets_everything(q: sqlq.Queue, db_url: str) -> None:
    q.subscribe("orders", "emails")
    q.subscribe("orders", "audit")
    sent = [f"order {i}" for i in range(50)]
    for body in sent:  # the audit process is not running
        q.publish("orders", body)
    assert len(drain(q, "emails")) == 50  # another subscriber went on meanwhile
    out, err = spawn(SUBSCRIBER, db_url).communicate(timeout=30)
    assert json.loads(out) == sent, err  # in order, nothing lost
