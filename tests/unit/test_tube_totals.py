"""A tube's totals (beanstalkd's ``total-jobs``, ``cmd-delete``, ``cmd-pause-tube`` of
``stats-tube``) are the database's: every put, delete and pause since it was created,
whoever made it, read the same by any Queue, the CLI and the server."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

import sqlq
from sqlq.cli import cli

TOTALS = ("total-jobs", "cmd-delete", "cmd-pause-tube")


def totals(q: sqlq.Queue, tube: str) -> tuple[int, int, int]:
    stats = q.stats_tube(tube)
    return stats["total-jobs"], stats["cmd-delete"], stats["cmd-pause-tube"]


def test_a_put_and_deleted_job_counts_in_another_queue(q: sqlq.Queue, db_url: str) -> None:
    q.put(b"x", tube="t")
    job = q.reserve("t", timeout=0)
    assert job is not None
    job.delete()
    assert totals(q, "t") == (1, 1, 0)
    with sqlq.Queue(db_url, durability="normal") as other:  # opened after: still counts
        assert totals(other, "t") == (1, 1, 0)
        other.pause_tube("t", 60)
        other.pause_tube("t", 0)
    assert totals(q, "t") == (1, 1, 2)
    assert totals(q, "never-used") == (0, 0, 0)


def test_interleaved_puts_count_each_tube(q: sqlq.Queue) -> None:
    """Runs of puts into one tube, broken by puts into others, a batch, a delayed put, a
    unique key already live (no job: not counted) and a put that rolled back."""
    q.put(b"1", tube="a")
    q.put(b"2", tube="a")
    q.put(b"3", tube="b")
    q.put(b"4", tube="a", unique_key="k")
    q.put(b"4 again", tube="a", unique_key="k")  # the live job's id: nothing put
    q.put_many([b"5", b"6", b"7"], tube="b")
    q.put(b"8", tube="c", delay=60)
    with pytest.raises(RuntimeError), q.transaction() as tx:
        tx.put(b"rolled back", tube="a")
        raise RuntimeError("roll back")
    q.put(b"9", tube="b")
    assert [totals(q, t)[0] for t in "abc"] == [3, 5, 1]
    for _ in range(2):
        job = q.reserve("b", timeout=0)
        assert job is not None
        job.delete()
    q.delete(q.peek_delayed("c").id)  # type: ignore[union-attr]
    assert [totals(q, t)[:2] for t in "abc"] == [(3, 0), (5, 2), (1, 1)]
    q.put(b"10", tube="a")
    assert [totals(q, t)[0] for t in "abc"] == [4, 5, 1]


def test_cli_stats_of_a_tube_shows_its_totals(q: sqlq.Queue, db_url: str) -> None:
    q.put(b"x", tube="t")
    q.put(b"y", tube="t")
    q.delete(1)
    q.pause_tube("t", 30)
    result = CliRunner().invoke(cli, ["--db", db_url, "stats", "--tube", "t", "--json"])
    assert result.exit_code == 0, result.output
    stats = json.loads(result.stdout)
    assert {k: stats[k] for k in TOTALS} == {"total-jobs": 2, "cmd-delete": 1,
                                             "cmd-pause-tube": 1}


@pytest.mark.sqlite_only
def test_jobs_live_at_the_upgrade_count_as_put(tmp_path: Path) -> None:
    """A file from before migration 0009: its live jobs count as puts of their tube,
    and the runs of puts go on from its highest id."""
    import apsw

    from sqlq.backends.sqlite import migrate

    path = tmp_path / "old.db"
    conn = apsw.Connection(str(path))
    old = [m for m in migrate.load_migrations() if m.version < 9]
    conn.execute("BEGIN")
    conn.execute("CREATE TABLE sqlq_schema (version INTEGER PRIMARY KEY, name TEXT NOT NULL,"
                 " applied_at INTEGER NOT NULL)")
    for m in old:
        conn.execute(m.sql)
        conn.execute("INSERT INTO sqlq_schema VALUES (?, ?, 0)", (m.version, m.name))
    for i, tube in enumerate(["a", "a", "b", "a"], 1):
        conn.execute("INSERT INTO sqlq_jobs (id, tube, priority, state, ttr, body, created_at)"
                     " VALUES (?, ?, 1024, 0, 60000, x'00', 0)", (i, tube))
    conn.execute("DELETE FROM sqlq_jobs WHERE id = 4")  # its id stays issued (sqlq_last_id)
    conn.execute("COMMIT")
    conn.close()
    with sqlq.Queue(path, durability="normal") as q:
        assert totals(q, "a")[:2] == (2, 0) and totals(q, "b")[:2] == (1, 0)
        assert q.put(b"x", tube="a") == 5
        q.put(b"y", tube="b")
        assert totals(q, "a")[0] == 3 and totals(q, "b")[0] == 2


def test_big_batches_count_their_tube_once_and_leave_the_triggers_on(q: sqlq.Queue) -> None:
    """A put_many of QUIET_BATCH jobs or more runs with the triggers off and counts its
    tube itself (SQLite): totals stay exact between single puts and batches of every
    size, and single puts after a batch are counted by the trigger again."""
    from sqlq.backends.sqlite.store import QUIET_BATCH

    expected = {"a": 0, "b": 0}
    for tube, n in [("a", QUIET_BATCH), ("a", 1), ("b", QUIET_BATCH * 2), ("b", 3),
                    ("a", 5), ("a", QUIET_BATCH + 1), ("b", 1), ("b", QUIET_BATCH)]:
        if n == 1:
            q.put(b"x", tube=tube)
        else:
            q.put_many([b"x"] * n, tube=tube)
        expected[tube] += n
        assert {t: totals(q, t)[0] for t in expected} == expected
    for _ in range(expected["a"]):
        job = q.reserve("a", timeout=0)
        assert job is not None
        job.delete()
    assert totals(q, "a")[:2] == (expected["a"], expected["a"])
