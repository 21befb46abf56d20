"""Groups (issue 38, sqlq/backends/store/groups.py): a job's group, claims that take a
tube's groups in turn, and each group's cap and rate, on both backends and both APIs.

The fairness run of the issue (100,000 jobs of one group, then 10 of another, 4 workers)
is in tests/integration/test_groups.py.
"""

from __future__ import annotations

import json
import threading
import time
from typing import Any

import pytest

import sqlq

from ..timing import FakeClock, soon

pytestmark = [pytest.mark.both_apis, pytest.mark.sqlite3_driver]


def drain(q: sqlq.Queue, tube: str) -> list[tuple[str | None, str]]:
    """Reserve and delete every job of tube, one at a time: (group, body) in claim order."""
    order = []
    while (job := q.reserve(tube, timeout=0)) is not None:
        order.append((job.group, job.body.decode()))
        job.delete()
    return order


def test_a_job_keeps_its_group(q: sqlq.Queue) -> None:
    jid = q.put(b"x", tube="t", group="acct-42")
    plain = q.put(b"y", tube="t")
    peeked = q.peek(jid)
    assert peeked is not None and peeked.group == "acct-42"
    assert q.peek(plain).group is None  # type: ignore[union-attr]
    assert q.stats_job(jid)["group"] == "acct-42"
    assert q.stats_job(plain)["group"] is None
    job = q.reserve("t", timeout=0)
    assert job is not None and job.id == jid and job.group == "acct-42"
    ids = q.put_many([b"a", b"b"], tube="t", group="g" * 200)
    assert [q.peek(i).group for i in ids] == ["g" * 200] * 2  # type: ignore[union-attr]


def test_a_transactions_puts_take_a_group(db_url: str) -> None:
    with sqlq.Queue(db_url) as q:
        with q.transaction() as tx:
            in_tx = tx.put(b"z", tube="t", group="tx")
            many = tx.put_many([b"1", b"2"], tube="t", group="tx-many")
        assert q.peek(in_tx).group == "tx"  # type: ignore[union-attr]
        assert {q.peek(i).group for i in many} == {"tx-many"}  # type: ignore[union-attr]


BAD_GROUPS: list[tuple[object, type[Exception]]] = [
    ("", ValueError), ("g" * 201, ValueError), (42, TypeError), (b"acct", TypeError),
    (["a"], TypeError)]


@pytest.mark.face
@pytest.mark.parametrize(("group", "error"), BAD_GROUPS)
def test_a_bad_group_puts_nothing(q: sqlq.Queue, group: object, error: type[Exception]
                                  ) -> None:
    with pytest.raises(error, match="group"):
        q.put(b"x", tube="t", group=group)  # type: ignore[arg-type]
    with pytest.raises(error, match="group"):
        q.put_many([b"x"], tube="t", group=group)  # type: ignore[arg-type]
    with pytest.raises(error, match="group"):
        q.limit("t", group_concurrency=0 if error is ValueError else "1")  # type: ignore[arg-type]
    assert q.stats()["total-jobs"] == 0 and q.limits() == {}


def test_groups_take_turns_fifo_within_each(q: sqlq.Queue) -> None:
    q.put_many([f"a{i}" for i in range(6)], tube="t", group="A")
    q.put_many([f"b{i}" for i in range(3)], tube="t", group="B")
    q.put_many([f"n{i}" for i in range(2)], tube="t")  # no group: one group more
    q.put(b"c0", tube="t", group="C")
    order = [body for _, body in drain(q, "t")]
    assert order == ["a0", "b0", "n0", "c0", "a1", "b1", "n1", "a2", "b2", "a3", "a4", "a5"]


def test_priority_comes_first(q: sqlq.Queue) -> None:
    q.put_many([f"a{i}" for i in range(3)], tube="t", group="A", priority=10)
    q.put(b"urgent-b", tube="t", group="B", priority=1)
    q.put(b"late-b", tube="t", group="B", priority=10)
    # B's turns count across bands: its second job's turn ties A's second's, and the
    # earlier put goes first.
    assert [body for _, body in drain(q, "t")] == ["urgent-b", "a0", "a1", "late-b", "a2"]


def test_a_group_that_comes_back_joins_the_current_round(q: sqlq.Queue) -> None:
    q.put_many([f"a{i}" for i in range(8)], tube="t", group="A")
    first = [q.reserve("t", timeout=0) for _ in range(4)]
    assert [j.body for j in first if j] == [b"a0", b"a1", b"a2", b"a3"]
    q.put_many([b"b0", b"b1"], tube="t", group="B")  # B never served: next, in turn
    assert [body for _, body in drain(q, "t")][:4] == ["a4", "b0", "a5", "b1"]


def test_a_tube_without_groups_stays_fifo(q: sqlq.Queue) -> None:
    q.put_many([f"x{i}" for i in range(5)], tube="plain")
    q.put(b"y", tube="other", group="A")  # another tube's groups change nothing here
    assert [body for _, body in drain(q, "plain")] == [f"x{i}" for i in range(5)]
    assert q.stats_tube("plain")["limit-concurrency"] == 0 and q.limits() == {}


def test_group_concurrency_caps_each_group(q: sqlq.Queue, db_url: str) -> None:
    q.put_many([f"a{i}" for i in range(5)], tube="t", group="A")
    q.put_many([f"b{i}" for i in range(5)], tube="t", group="B")
    assert q.limit("t", group_concurrency=2) == {
        "concurrency": None, "rate": None, "group_concurrency": 2, "group_rate": None}
    with sqlq.Queue(db_url) as other:  # another process's claims count too
        held = [q.reserve("t", timeout=0), other.reserve("t", timeout=0),
                q.reserve("t", timeout=0), other.reserve("t", timeout=0)]
        assert sorted(j.group for j in held if j) == ["A", "A", "B", "B"]
        assert q.reserve("t", timeout=0) is None and other.reserve("t", timeout=0) is None
        q.put(b"n", tube="t")  # jobs without a group obey the tube's limits alone
        assert q.reserve("t", timeout=0).group is None  # type: ignore[union-attr]
        a = next(j for j in held if j and j.group == "A")
        a.delete()  # a slot of A frees
        nxt = other.reserve("t", timeout=0)
        assert nxt is not None and nxt.group == "A" and q.reserve("t", timeout=0) is None
        batch = q.reserve_many(10, "t", timeout=0)
        assert batch == []
        assert q.limit("t", group_concurrency=None)["group_concurrency"] is None
        assert len(q.reserve_many(10, "t", timeout=0)) == 5


def test_group_caps_combine_with_the_tube_cap(q: sqlq.Queue) -> None:
    for g in "ABC":
        q.put_many([f"{g}{i}" for i in range(3)], tube="t", group=g)
    q.limit("t", concurrency=2, group_concurrency=1)
    assert len(q.reserve_many(10, "t", timeout=0)) == 2  # the tube's cap is the smaller
    q.limit("t", concurrency=None)
    assert [j.group for j in q.reserve_many(10, "t", timeout=0)] == ["C"]
    assert q.limits() == {"t": {"concurrency": None, "rate": None, "group_concurrency": 1,
                                "group_rate": None}}


def test_group_rate_is_a_token_bucket_per_group(fq: sqlq.Queue, clock: FakeClock) -> None:
    fq.put_many([f"a{i}" for i in range(10)], tube="t", group="A")
    fq.put_many([f"b{i}" for i in range(10)], tube="t", group="B")
    fq.limit("t", group_rate=(2, 1))  # 2 tokens a group, one more every 0.5 s
    batch = fq.reserve_many(10, "t", timeout=0)
    assert sorted(j.group for j in batch) == ["A", "A", "B", "B"]
    assert fq.reserve("t", timeout=0) is None
    assert fq.engine.due(fq.engine.tubes("t")) == clock.now + 500
    clock.advance(0.5)
    assert sorted(j.group for j in fq.reserve_many(10, "t", timeout=0)) == ["A", "B"]
    fq.limit("t", group_rate=None)
    assert len(fq.reserve_many(20, "t", timeout=0)) == 14


def test_reserve_job_bypasses_the_group_cap(q: sqlq.Queue) -> None:
    ids = q.put_many([b"a0", b"a1"], tube="t", group="A")
    q.limit("t", group_concurrency=1)
    assert q.reserve("t", timeout=0) is not None
    job = q.reserve_job(ids[1])
    assert job.group == "A"


def test_a_reserve_blocked_by_a_group_cap_wakes_when_a_slot_frees(q: sqlq.Queue,
                                                                  db_url: str) -> None:
    q.put_many([b"a0", b"a1"], tube="t", group="A")
    q.limit("t", group_concurrency=1)
    held = q.reserve("t", timeout=0)
    assert held is not None
    got: list[Any] = []
    with sqlq.Queue(db_url) as waiter:
        thread = threading.Thread(target=lambda: got.append(waiter.reserve("t", timeout=60)))
        thread.start()
        thread.join(0.2)
        assert thread.is_alive() and not got  # A is at its cap: the reserve waits
        start = time.monotonic()
        held.delete()
        thread.join(soon())
        assert got and got[0] is not None and got[0].body == b"a1"
        assert time.monotonic() - start < soon()


def test_a_delayed_or_released_job_keeps_its_group(fq: sqlq.Queue, clock: FakeClock) -> None:
    fq.put(b"d", tube="t", group="A", delay=5)
    fq.put(b"b", tube="t", group="B")
    job = fq.reserve("t", timeout=0)
    assert job is not None and job.body == b"b"
    job.release()
    clock.advance(5)
    assert sorted(g for g, _ in drain(fq, "t")) == ["A", "B"]


def test_task_options_group(db_url: str) -> None:
    with sqlq.Queue(db_url) as q:
        @q.task(tube="tasks")
        def sync(account: int) -> None: ...

        jid = sync.options(group="acct-7").put(7)
        assert q.peek(jid).group == "acct-7"  # type: ignore[union-attr]
        with pytest.raises(ValueError, match="group"):
            sync.options(group="")


def test_sqlq_put_through_a_stdlib_connection(app_file: str) -> None:
    import sqlite3

    conn = sqlite3.connect(app_file, isolation_level=None)
    try:
        jid = sqlq.put(conn, b"x", tube="t", group="app")
        ids = sqlq.put_many(conn, [b"y"], tube="t", group="app2")
        with pytest.raises(ValueError, match="group"):
            sqlq.put(conn, b"z", tube="t", group="")
    finally:
        conn.close()
    with sqlq.Queue(app_file) as q:
        assert q.peek(jid).group == "app"  # type: ignore[union-attr]
        assert q.peek(ids[0]).group == "app2"  # type: ignore[union-attr]
        assert q.stats()["total-jobs"] == 2


def test_cli_group_options(db_url: str, tmp_path: Any) -> None:
    from click.testing import CliRunner

    from sqlq.cli import cli

    def run(*args: str, stdin: str | None = None) -> tuple[int, str, str]:
        r = CliRunner().invoke(cli, ["--db", db_url, *args], input=stdin)
        return r.exit_code, r.stdout, r.stderr

    code, out, _ = run("put", "x", "--tube", "t", "--group", "acct-1")
    assert code == 0
    jid = int(out)
    code, out, _ = run("put-many", "--tube", "t", "--group", "acct-2", stdin="a\nb\n")
    assert code == 0 and len(out.split()) == 2
    code, out, _ = run("peek", str(jid))
    assert code == 0 and "acct-1" in out
    code, out, _ = run("peek", str(jid), "--json")
    assert json.loads(out)["group"] == "acct-1"
    code, _, err = run("put", "x", "--tube", "t", "--group", "")
    assert code != 0 and "group" in err
    assert run("limit", "t", "--group-concurrency", "2", "--group-rate", "60/m")[:2] == (
        0, "t: no cap, no rate, group concurrency 2, group rate 60/m\n")
    assert run("limit", "t", "--group-rate", "none")[1] == \
        "t: no cap, no rate, group concurrency 2, no group rate\n"
    assert run("limit", "t", "--group-concurrency", "0")[0] == 2
    assert run("limit", "t", "--clear")[1] == "t: no cap, no rate, no group cap, no group rate\n"
    with sqlq.Queue(db_url) as q:
        assert q.limits() == {}
        assert sorted(g for g, _ in drain(q, "t")) == ["acct-1", "acct-2", "acct-2"]


def test_copy_carries_groups(db_url: str, tmp_path: Any) -> None:
    from sqlq.copy import copy

    with sqlq.Queue(db_url) as q:
        q.put_many([b"a0", b"a1", b"a2"], tube="t", group="A")
        q.put(b"b0", tube="t", group="B")
        q.limit("t", group_concurrency=3)
        limits = q.limits()
    target = str(tmp_path / "copy.db")
    copy(db_url, target)
    with sqlq.Queue(target) as copied:
        assert copied.limits() == limits
        assert [body for _, body in drain(copied, "t")] == ["a0", "b0", "a1", "a2"]
