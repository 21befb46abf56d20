"""A tube's totals (beanstalkd's ``total-jobs``, ``cmd-delete``, ``cmd-pause-tube`` of
``stats-tube``) are the database's: every put, delete and pause since it was created,
whoever made it, read the same by any Queue, the CLI and the server."""

from __future__ import annotations

import json

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
