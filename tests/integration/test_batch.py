"""reserve_many and delete_many: many jobs per commit, with one-at-a-time semantics.

The tests that start other processes, moved from tests/unit/test_batch.py
(which keeps the in-process ones)."""

from __future__ import annotations

import time

import pytest

from sqlq import Queue
from tests.conftest import spawn
from tests.workers import drain_exactly_once

pytestmark = [pytest.mark.both_apis, pytest.mark.sqlite3_driver, pytest.mark.sql_ascii]


def test_waiting_is_woken_by_a_put_from_another_process(q: Queue, db_url: str) -> None:
    producer = spawn("""
        import sys, time, sqlq
        time.sleep(0.5)
        with sqlq.Queue(sys.argv[1], durability="normal") as q:
            q.put_many([b"1", b"2", b"3"], tube="t")
    """, db_url)
    start = time.monotonic()
    jobs = q.reserve_many(10, tubes="t", timeout=30)
    took = time.monotonic() - start
    assert producer.wait(30) == 0
    assert [j.body for j in jobs] == [b"1", b"2", b"3"]
    assert took < 10
    q.delete_many(jobs)


BATCH_DRAINER = """
import sys, sqlq
q = sqlq.Queue(sys.argv[1], durability=sys.argv[2])
got = []
jobs = q.reserve_many(10, timeout=2)
while jobs:
    got += [j.id for j in jobs]
    q.delete_many(jobs)
    jobs = q.reserve_many(10, timeout=1)
print(" ".join(map(str, got)))
"""


@pytest.mark.slow
def test_four_processes_drain_with_batches_exactly_once(db_url: str) -> None:
    drain_exactly_once(db_url, BATCH_DRAINER, 3000)
    with Queue(db_url) as q:
        assert q.stats()["current-jobs-ready"] == 0
        assert q.stats()["current-jobs-reserved"] == 0
