"""The check that the counts kept per tube and state (migration 0005) equal a real COUNT(*)
of the rows, and that stats and stats_tube agree with what the rows say as of now: shared
by tests/unit/test_job_counts.py and tests/integration/test_job_counts.py."""

from __future__ import annotations

import sqlite3
from collections import Counter
from typing import Any

import sqlq

TUBES = ("a", "b", "c", "old", "other")
STATS_KEYS = ("current-jobs-ready", "current-jobs-urgent", "current-jobs-reserved",
              "current-jobs-delayed", "current-jobs-buried")

_KEPT = """SELECT tube, state, urgent, sum(n) FROM sqlq_job_counts
            GROUP BY tube, state, urgent HAVING sum(n) <> 0"""
_ROWS = "SELECT tube, state, priority, delay_until, reserved_until FROM sqlq_jobs"


def read_counts(url: str, queue: sqlq.Queue | None = None
          ) -> tuple[Counter[tuple[str, int, int]], list[tuple[Any, ...]]]:
    """(the kept counts, every job's (tube, state, priority, delay_until, reserved_until)),
    through the queue's own connection if given (one snapshot), else a file's."""
    if queue is not None:
        with queue.transaction() as tx:
            kept = [tuple(r) for r in tx.execute(_KEPT)]
            rows = [tuple(r) for r in tx.execute(_ROWS)]
    else:
        conn = sqlite3.connect(url)
        try:
            kept = conn.execute(_KEPT).fetchall()
            rows = conn.execute(_ROWS).fetchall()
        finally:
            conn.close()
    return Counter({(t, int(s), int(u)): int(n) for t, s, u, n in kept}), rows


def check_counts(url: str, now: int | None = None,
                 queue: sqlq.Queue | None = None) -> None:
    """The kept counts equal COUNT(*) of the rows; with a queue, its stats_tube of each tube
    and stats equal what the rows say as of ``now``."""
    kept, rows = read_counts(url, queue)
    real = Counter((t, int(s), int(s == 0 and p < 1024)) for t, s, p, _, _ in rows
                   if s in (0, 1, 3))
    assert kept == real
    if queue is None or now is None:
        return
    expect: dict[str, Counter[str]] = {t: Counter() for t in TUBES}
    for tube, state, priority, delay_until, reserved_until in rows:
        due = (state == 1 and delay_until <= now) or (state == 2 and reserved_until <= now)
        key = {0: "ready", 1: "delayed", 2: "reserved", 3: "buried", 4: "waiting"}[state]
        if due:
            key = "ready"
        c = expect.setdefault(tube, Counter())
        c[f"current-jobs-{key}"] += 1
        if key == "ready" and priority < 1024:
            c["current-jobs-urgent"] += 1
    total: Counter[str] = Counter()
    for tube, c in expect.items():
        stats = queue.stats_tube(tube)
        assert {k: stats[k] for k in STATS_KEYS} == {k: c[k] for k in STATS_KEYS}, tube
        total.update(c)
    stats = queue.stats()
    assert {k: stats[k] for k in STATS_KEYS} == {k: total[k] for k in STATS_KEYS}
