"""Enqueue in the application's own transaction: q.transaction() (apsw) and sqlq.put (sqlite3).

The tests that start other processes, moved from tests/unit/test_transactions.py
(which keeps the in-process ones)."""

from __future__ import annotations

import sqlite3
import statistics
import time

import pytest

import sqlq
from tests.conftest import spawn

pytestmark = pytest.mark.sql_ascii  # as under tests/unit/: SQL_ASCII PostgreSQL too


WAITER = """
import sys, time, sqlq
q = sqlq.Queue(sys.argv[1], durability="normal")
print("ready", flush=True)
for _ in range(int(sys.argv[2])):
    job = q.reserve("emails", timeout=20)
    woke = time.monotonic()
    job.delete()
    print(woke, flush=True)
q.close()
"""


def test_worker_in_another_process_wakes_after_a_stdlib_commit(app_file: str) -> None:
    db_path = app_file
    rounds = 10
    worker = spawn(WAITER, db_path, str(rounds))
    assert worker.stdout is not None and worker.stdout.readline().strip() == "ready"
    conn = sqlite3.connect(db_path)
    latencies = []
    for i in range(rounds):
        time.sleep(0.05)  # the worker is asleep in reserve by now
        conn.execute("INSERT INTO orders (item) VALUES (?)", (f"item {i}",))
        sqlq.put(conn, f"order {i}", tube="emails")
        conn.commit()
        committed = time.monotonic()
        latencies.append((float(worker.stdout.readline()) - committed) * 1000)
    conn.close()
    assert worker.wait(timeout=20) == 0
    p50 = statistics.median(latencies)
    print(f"\nreserve wake latency after a stdlib sqlite3 commit, across processes: "
          f"p50 {p50:.2f} ms, max {max(latencies):.2f} ms ({rounds} commits)")
    assert p50 < 100  # generous: a shared CI machine; typical is well under 1 ms
