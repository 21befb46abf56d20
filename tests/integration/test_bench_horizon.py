"""bench/horizon.py (issue 28's rows): a drain under a held snapshot shows in the state
the bench reports, on a real file and a real PostgreSQL database, with the drain in a
child process on this checkout's sqlq (as ``--sqlq TREE`` runs it). The checks are on
counts and sizes, never on rates: a shared machine moves those."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"
sys.path.insert(0, str(BENCH))

import horizon  # noqa: E402


def _row(db_url: str, holder: str) -> horizon.Result:
    pg = "://" in db_url
    side = horizon.PgSide() if pg else horizon.SqliteSide()
    # SQLite: enough jobs that the -wal would wrap (its autocheckpoint, 1,000 pages: ~2 MB) without
    # a reader. PostgreSQL: enough that the floors' lag (the jobs claimed while a candidate
    # ripens, RIPE_MS to twice that: ~60 at 2,000 jobs/s) is small beside the n/2 dead entries
    # a claim would walk without floors; at 200 a fast drain reached n/4 (CI, stop 57)
    n = 1000
    return horizon.measure(side, db_url, horizon.Tree.of(str(BENCH.parent)), n, holder,
                           "fast", "normal")


@pytest.mark.slow  # two child processes, VACUUMs: ~2 s on PostgreSQL on two busy cores
def test_a_held_snapshot_keeps_the_drains_garbage(db_url: str) -> None:
    r = _row(db_url, "snapshot")
    assert r.tree.startswith(BENCH.parent.name) and r.sqlq == str(BENCH.parent / "sqlq")
    assert len(r.tenths) == 10 and r.first > 0 and r.last > 0
    assert len(r.steady) == 10 and min(r.steady) > 0 and r.steady_ratio > 0
    if r.backend == "sqlite":
        # ~13 KB a job, none of it checkpointed past the reader's snapshot
        assert r.state["wal_end"] > 8 * 2**20
        assert r.state["wal_peak"] >= r.state["wal_end"]
    else:
        # a claim reads from its band's floor (sqlq_floors), not every dead entry
        # before it (~n/2 a job before the floors): what is left is the floors' lag, which
        # grows with the drain's rate, not with n
        assert 0 < r.state["ready_reads"] / r.n < r.n / 4
        assert r.state["kept"] >= r.n  # a claim and a delete: two dead versions a job
        assert r.state["ready_index"] > 0
        assert "sqlq_jobs_ready" in horizon.state_text(r)


def test_without_a_holder_the_garbage_goes(db_url: str) -> None:
    r = _row(db_url, "none")
    if r.backend == "sqlite":
        assert r.state["wal_end"] < 6 * 2**20
    else:
        assert r.state["ready_reads"] / r.n < 10
        assert r.state["kept"] == 0


def test_idle_xid_is_postgresqls_only() -> None:
    assert horizon.plan(["sqlite", "postgres"], ["none", "idle-xid"]) == [
        ("sqlite", "none"), ("postgres", "none"), ("postgres", "idle-xid")]
    with pytest.raises(SystemExit, match="multiples of 10"):
        horizon.main(["--sizes", "15"])
    with pytest.raises(SystemExit, match="no sqlq/__init__.py"):
        horizon.main(["--sqlq", "/nonexistent"])
