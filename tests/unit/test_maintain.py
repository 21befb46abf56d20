"""``sqlq maintain`` on a SQLite file: the checkpoint, the file's health and its size,
read through the named queries of sqlite/queries.sql (checkpoint, optimize, file_health).
PostgreSQL's report is tested against a real long transaction in test_postgres.py."""

from __future__ import annotations

import json
import os

from click.testing import CliRunner

import sqlq
from sqlq.cli import cli


def test_maintain_checkpoints_the_wal_and_reports_the_file(db_path: str) -> None:
    with sqlq.Queue(db_path) as q:
        q.put_many([b"x" * 1000] * 200, tube="t")
        for _ in range(200):
            job = q.reserve("t", timeout=0)
            assert job is not None
            job.delete()
        report = q.backend.maintain()
        assert report["checkpoint"] == "done" and "wal-frames-checkpointed" in report
        assert report["quick-check"] == "ok"
        assert report["page-size"] * report["pages"] == os.path.getsize(db_path)
        assert 0 <= report["free-pages"] <= report["pages"]
        assert os.path.getsize(f"{db_path}-wal") == 0  # truncated by the checkpoint
    out = CliRunner().invoke(cli, ["--db", db_path, "maintain", "--json"])
    assert out.exit_code == 0, out.output
    assert json.loads(out.output)["quick-check"] == "ok"


def test_maintain_prunes_the_finished_records_past_retention(db_path: str) -> None:
    """A queue worked without ``sqlq work`` (whose workers prune once a minute): ``sqlq
    maintain`` from cron prunes its finished records down to the retention's count."""
    with sqlq.Queue(db_path) as q:
        q.retention(max_count=5)
        for _ in range(12):
            job = q.reserve_job(q.put(b"x", tube="t"))
            job.delete()
        first = q.put(b"first", tube="t")
        q.delete(first)
    out = CliRunner().invoke(cli, ["--db", db_path, "maintain", "--json"])
    assert out.exit_code == 0, out.output
    report = json.loads(out.output)
    assert report["pruned-finished"] == 12 - 5 and report["quick-check"] == "ok"  # per outcome
    with sqlq.Queue(db_path) as q:
        assert q.finished(first) is not None and q.finished(1) is None  # newest kept
