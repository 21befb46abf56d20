"""What holds back the cleanup of deleted jobs (sqlq/horizon.py), read from real
databases while a second real connection holds a snapshot (tests/snapshots.py): on
SQLite the -wal file's growth and checkpoint starvation, on PostgreSQL the holder of the
xmin horizon, named, with its age and the dead rows it keeps. The gauges, the dashboard
and sqlq work's warnings over the same reports: tests/integration/test_horizon.py."""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Iterator

import psycopg
import pytest

import sqlq
from sqlq.errors import Error
from sqlq.horizon import DEFAULT_WAL_BYTES, Thresholds, alarms, check_every, parse_size
from sqlq.work.handling import JobHandling
from sqlq.work.horizon import HorizonWatch
from tests.pgserver import PgServer
from tests.snapshots import churn, held_snapshot
from tests.timing import FakeClock
from tests.workers import wait_for

MIB = 1024 * 1024


@pytest.mark.sqlite_only
def test_a_reader_starves_the_wal_until_it_ends(fq: sqlq.Queue, db_url: str,
                                                clock: FakeClock) -> None:
    """The WAL grows behind a reader's snapshot; the starvation is timed by the Queue's
    clock from the first look that saw it; the default thresholds warn past 5 minutes;
    the reader's end clears it, and a maintain's checkpoint shrinks the file."""
    assert fq.horizon().wal_starved_bytes == 0 and not alarms(fq.horizon(), Thresholds())
    with held_snapshot(db_url):
        churn(fq)
        first = fq.horizon()
        assert first.wal_starved_bytes is not None and first.wal_starved_bytes > 4 * MIB
        assert first.wal_bytes is not None and first.wal_bytes >= first.wal_starved_bytes
        assert first.age == 0 and not alarms(first, Thresholds())  # 5 min, 256 MiB
        clock.advance(301)
        churn(fq)
        later = fq.horizon()
        assert later.age == 301
        assert later.wal_starved_bytes is not None
        assert later.wal_starved_bytes > first.wal_starved_bytes + 4 * MIB  # grows on
        found = alarms(later, Thresholds())
        assert list(found) == ["horizon"] and "5m01s" in found["horizon"]
        assert list(alarms(later, Thresholds(wal_bytes=MIB))) == ["horizon", "wal"]
    clock.advance(10)
    fq.put(b"after")  # a commit, then a look: the checkpoint copies every frame back
    ended = fq.horizon()
    assert (ended.age, ended.wal_starved_bytes) == (0, 0)
    assert list(alarms(ended, Thresholds(wal_bytes=MIB))) == ["wal"]  # still that large
    fq.backend.maintain()  # its checkpoint truncates the file (PRAGMA optimize may write)
    after = fq.horizon()
    assert after.wal_bytes is not None and after.wal_bytes < MIB
    assert not alarms(after, Thresholds(wal_bytes=MIB))


@pytest.mark.sqlite_only
def test_short_readers_are_not_starvation(fq: sqlq.Queue, db_url: str,
                                          clock: FakeClock) -> None:
    """A reader that ends before the next look, while the WAL starts again between
    looks, does not accumulate an age: only one unbroken starvation counts."""
    with held_snapshot(db_url):
        churn(fq)
        assert fq.horizon().wal_starved_bytes
    clock.advance(400)
    fq.put(b"x")
    assert fq.horizon().age == 0
    with held_snapshot(db_url):
        churn(fq, jobs=100)
        fq.horizon()
    clock.advance(400)
    assert fq.horizon().age == 0


@pytest.mark.postgres_only
def test_a_held_snapshot_names_its_holder_and_dead_rows(q: sqlq.Queue, db_url: str) -> None:
    """A REPEATABLE READ session of this database: the holder of the horizon, by pid,
    with its age from the server and the dead rows of the jobs it keeps; gone when it
    ends. In a SQL_ASCII database too (postgres-ascii)."""
    with held_snapshot(db_url) as pid:
        churn(q, jobs=200, size=10)
        horizon = wait_for(lambda: (h := q.horizon()).age > 0.2
                           and h.dead_rows.get("sqlq_jobs", 0) >= 200 and h,
                           what="an old holder and 200 dead rows")
        holder = horizon.holder
        assert holder is not None and holder == horizon.holders[0]
        assert (holder.kind, holder.name, holder.visible, holder.observed) == (
            "transaction", f"pid {pid}", True, False)
        assert holder.xid_age >= 1 and "idle in transaction" in holder.detail
        assert horizon.hidden == 0 and horizon.age == holder.seconds
        found = alarms(horizon, Thresholds(age=0.2))
        assert list(found) == ["horizon"] and f"pid {pid}" in found["horizon"]
        assert not alarms(horizon, Thresholds())  # 5 minutes
        assert f"pid {pid}" in q.backend.maintain()["oldest-transaction"]
    wait_for(lambda: all(h.name != f"pid {pid}" for h in q.horizon().holders),
             what="the holder gone")


@pytest.fixture
def plain_role(pg_server: PgServer, db_url: str) -> Iterator[str]:
    """A URL of db_url as a role without superuser nor pg_read_all_stats."""
    role = f"plain_{uuid.uuid4().hex[:12]}"
    database = db_url.rsplit("/", 1)[1]
    pg_server.psql(f"CREATE ROLE {role} LOGIN")
    pg_server.psql(f"GRANT ALL ON SCHEMA public TO {role}; "
                   f"GRANT ALL ON ALL TABLES IN SCHEMA public TO {role}; "
                   f"GRANT ALL ON ALL SEQUENCES IN SCHEMA public TO {role}; "
                   f"GRANT ALL ON ALL FUNCTIONS IN SCHEMA public TO {role}", database)
    yield db_url.replace("://postgres@", f"://{role}@", 1)
    pg_server.psql(f"REASSIGN OWNED BY {role} TO postgres; DROP OWNED BY {role}", database)
    pg_server.psql(f"DROP ROLE {role}")


@pytest.mark.postgres_only
@pytest.mark.pg_fresh  # the grants leave the tables' privileges spelled out
def test_another_roles_transaction_is_named_though_hidden(plain_role: str, db_url: str,
                                                          clock: FakeClock) -> None:
    """Without pg_read_all_stats a role sees another role's backend_xmin but not its
    transaction's start: the holder is still named, its age counted from when this
    process first saw it (the Queue's clock), and the report says what to grant."""
    with sqlq.Queue(plain_role, clock=clock) as plain, held_snapshot(db_url) as pid:
        first = plain.horizon()
        assert first.holder is not None and first.holder.name == f"pid {pid}"
        assert (first.holder.visible, first.holder.observed, first.hidden) == (False, True, 1)
        assert "pg_read_all_stats" in first.holder.detail
        clock.advance(400)
        later = plain.horizon()
        assert later.age == 400 and "as seen by this process" in alarms(
            later, Thresholds())["horizon"]
    with psycopg.connect(plain_role) as conn:  # the role really is not privileged
        row = conn.execute("SELECT rolsuper FROM pg_roles WHERE rolname = current_user"
                           ).fetchone()
        assert row == (False,)


def test_thresholds_from_the_environment() -> None:
    assert Thresholds.from_env({}) == Thresholds(300.0, DEFAULT_WAL_BYTES)
    assert Thresholds.from_env({"SQLQ_WARN_HORIZON_AGE": "90s",
                                "SQLQ_WARN_WAL_SIZE": "64M"}) == Thresholds(90.0, 64 * MIB)
    assert check_every({"SQLQ_HORIZON_CHECK": "500ms"}) == 0.5 and check_every({}) == 30.0
    assert parse_size("1048576") == MIB and parse_size("1.5 KiB") == 1536
    with pytest.raises(Error, match=r"^\$SQLQ_WARN_WAL_SIZE: '12 parsecs' is not a size"):
        Thresholds.from_env({"SQLQ_WARN_WAL_SIZE": "12 parsecs"})
    with pytest.raises(Error, match=r"^\$SQLQ_WARN_HORIZON_AGE: '-5m' is not a duration"):
        Thresholds.from_env({"SQLQ_WARN_HORIZON_AGE": "-5m"})


def test_a_worker_warns_once_then_says_it_cleared(q: sqlq.Queue, db_url: str,
                                                 caplog: pytest.LogCaptureFixture) -> None:
    """sqlq work's watch (work/horizon.py): one warning when a threshold is first
    passed, none at the looks after while it stays passed, one line when it clears."""
    watch = HorizonWatch(q, Thresholds(age=0.0, wal_bytes=2**40), every=3600)
    caplog.set_level(logging.INFO, logger="sqlq.worker")
    with held_snapshot(db_url):
        churn(q, jobs=300, size=16_000)
        for _ in range(4):
            watch.check()
            wait_for(lambda: q.horizon().age > 0, what="an age")
        assert watch.raised == {"horizon"}
    watch.check()
    if watch.raised:  # PostgreSQL: the server may end the session a moment later
        wait_for(lambda: not alarms(q.horizon(), watch.thresholds), what="the end")
        watch.check()
    messages = [r.getMessage() for r in caplog.records if r.name == "sqlq.worker"]
    warned = [m for m in messages if "see the docs: long-transactions.md" in m]
    assert len(warned) == 1 and messages[-1].startswith("cleared: no snapshot holds back")
    assert sum(m.startswith("cleared:") for m in messages) == 1
    assert watch.due > time.monotonic() + 3000  # the next look is an interval away


def test_the_worker_loop_looks_only_when_due(q: sqlq.Queue) -> None:
    """JobHandling.tick, once per turn of a worker's loop: a look at its first turn,
    then none until SQLQ_HORIZON_CHECK (30 s by default) has passed."""
    handling = JobHandling(q, ["t"])
    try:
        handling.tick()
        due = handling.horizon.due
        assert due >= time.monotonic() + 25
        for _ in range(100):
            handling.tick()
        assert handling.horizon.due == due
    finally:
        handling.close()
