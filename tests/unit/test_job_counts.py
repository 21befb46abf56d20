"""The counts kept per tube and state (migration 0005, issue 39): the chaos checker finds a
count that is off, PostgreSQL's puts in one transaction write no counter row each, its
claim is never JIT-compiled, and the migration counts the jobs already there. The
randomized run of every verb (it starts processes that die holding jobs) is in
tests/integration/test_job_counts.py."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import sqlq

from ..kept_counts import check_counts
from ..oldschema import empty_database
from ..timing import FakeClock


def test_chaos_checker_finds_a_kept_count_off(db_url: str) -> None:
    """The chaos suite's end-of-round check (tests/chaos_checker.py) reads both counts in one
    snapshot and names each key whose kept count is off."""
    from ..chaos_checker import broken_job_counts

    with sqlq.Queue(db_url, durability="normal") as q:
        q.put_many([b"x"] * 3, tube="a")
        q.put(b"y", tube="a", priority=5000, delay=60)
        assert broken_job_counts(db_url) == []
        # SQLite's sqlq_job_counts is a view of the kept rows (migration 0007).
        kept = "sqlq_job_counts_kept" if "://" not in db_url else "sqlq_job_counts"
        with q.transaction() as tx:
            tx.execute(f"UPDATE {kept} SET n = n + 1 WHERE state = 1")
    [problem] = broken_job_counts(db_url)  # ('a', ...) or, in SQL_ASCII, (b'a', ...)
    assert problem.startswith("kept count of (") and problem.endswith("a', 1, 0) is 2, COUNT(*) 1")


def test_runs_of_ready_puts_count_exactly(db_url: str, clock: FakeClock,
                                          tmp_path: Path) -> None:
    """SQLite counts a run of ready puts of one tube and urgency by its ids (migration
    0007): exact through claims and deletes of the run's jobs (its highest one too), a
    put rolled back, another urgency or state, a put_many with the triggers off, and a
    copy whose ids have gaps (the target's runs must not count by ids it did not issue)."""
    from sqlq.copy import copy

    with sqlq.Queue(db_url, durability="normal", clock=clock) as q:
        for _ in range(5):
            q.put(b"x", tube="a")
        check_counts(db_url, clock(), q)
        job = q.reserve("a", timeout=0)  # the run's first job: counted at once
        assert job is not None
        job.delete()
        held = q.reserve_many(2, "a", timeout=0)  # two of the pending ones
        check_counts(db_url, clock(), q)
        q.delete_many(held)
        check_counts(db_url, clock(), q)
        last = q.put(b"x", tube="a")
        q.delete(last)  # the highest id: sqlq_last_id keeps it
        q.put(b"x", tube="a")
        check_counts(db_url, clock(), q)
        with pytest.raises(RuntimeError), q.transaction() as tx:
            tx.put(b"x", tube="a")
            tx.put(b"x", tube="a")
            raise RuntimeError("rolled back")
        check_counts(db_url, clock(), q)
        q.put(b"x", tube="a", priority=5000)  # another urgency, another state
        q.put(b"x", tube="a", priority=5000)
        q.put(b"x", tube="a", priority=5000, delay=30)
        q.put(b"x", tube="a", priority=5000)
        check_counts(db_url, clock(), q)
        q.put_many([b"x"] * 100, tube="a", priority=5000)  # triggers off on SQLite
        q.put(b"x", tube="a", priority=5000)
        q.put(b"x", tube="b")
        check_counts(db_url, clock(), q)
        for job_id in range(1, 200, 3):  # gaps for the copy
            try:
                q.delete(job_id)
            except sqlq.JobNotFound:
                pass
        check_counts(db_url, clock(), q)
        ready, drained = q.stats_tube("a")["current-jobs-ready"], 0
        while q.reserve("a", timeout=0) is not None:
            drained += 1
        assert ready == drained
    copied = str(tmp_path / "copy.db")
    with sqlq.Queue(db_url, durability="normal", clock=clock) as q:
        for _ in range(40):
            q.put(b"x", tube="c")
        for job_id in range(q.stats()["total-jobs"], 0, -4):
            try:
                q.delete(job_id)
            except sqlq.JobNotFound:
                pass
        check_counts(db_url, clock(), q)
    copy(db_url, copied, clock=clock)
    check_counts(copied)
    with sqlq.Queue(copied, durability="normal", clock=clock) as target:
        target.put(b"x", tube="c")
        target.put(b"x", tube="c")
        check_counts(copied, clock(), target)


def _counter_writes(tx: Any) -> int:
    """Rows inserted or updated in the counter tables, by this session's transactions
    whose statistics are not sent yet (the current one and maybe some before it)."""
    [(writes,)] = tx.execute(
        "SELECT coalesce(sum(n_tup_ins + n_tup_upd), 0) FROM pg_stat_xact_user_tables"
        " WHERE relname = 'sqlq_job_counts'")
    return int(writes)


def _writes_besides_jobs(tx: Any) -> int:
    """Rows inserted or updated in every table but the jobs, their edges and the count
    deltas, by this session's transactions whose statistics are not sent yet."""
    [(writes,)] = tx.execute(
        "SELECT coalesce(sum(n_tup_ins + n_tup_upd), 0) FROM pg_stat_xact_user_tables"
        " WHERE relname NOT IN ('sqlq_jobs', 'sqlq_edges', 'sqlq_count_deltas')")
    return int(writes)


@pytest.mark.postgres_only
def test_postgres_puts_in_one_transaction_rewrite_no_counter_row(db_url: str,
                                                                 clock: FakeClock) -> None:
    """N puts in one transaction cost O(N): the counter rows are written by the first
    counting statement alone (each later upsert made one more version of the same row,
    which the next one walked: 20,000 puts took 15 s), the rest go to deltas folded at
    commit (migration 0006). Counted rightly through a rolled-back savepoint, a rolled
    back transaction and a kick of many jobs in one statement."""
    with sqlq.Queue(db_url, durability="normal", clock=clock) as q:
        q.put(b"first", tube="a")  # the slot's rows exist: later writes would be updates
        q.put(b"first", tube="b", delay=60)
        with q.transaction() as tx:
            before = _counter_writes(tx)
            for i in range(2000):
                tx.put(b"x", tube="a", priority=2000 if i % 3 else 10)
                if i % 10 == 0:
                    tx.put(b"y", tube="b", delay=60)
            tx.execute("SAVEPOINT s")
            for _ in range(5):
                tx.put(b"gone", tube="a")
            tx.execute("ROLLBACK TO SAVEPOINT s")
            writes = _counter_writes(tx) - before
        assert writes <= 4, writes  # 4,400 before 0005: one per put per counter
        with pytest.raises(RuntimeError), q.transaction() as tx:
            for _ in range(3):
                tx.put(b"rolled back", tube="a")
            raise RuntimeError
        assert (q.stats_tube("a")["total-jobs"], q.stats_tube("b")["total-jobs"]) == (2001, 201)
        check_counts(db_url, clock(), q)
        for job in q.reserve_many(300, "a", timeout=0):
            q.bury(job.id)
        assert q.kick(1000, "a") == 300  # one statement moving 300 jobs
        check_counts(db_url, clock(), q)


@pytest.mark.postgres_only
def test_postgres_a_put_is_counted_by_one_upsert_whatever_its_state(db_url: str,
                                                                   clock: FakeClock) -> None:
    """A put's statement writes one counter row (migration 8: its puts beside its jobs'
    state; two rows before, sqlq_tube_puts' and sqlq_job_counts'), whatever the state of
    its jobs: ready, urgent, delayed, waiting on a parent; by put_many and in a
    transaction's deltas too. A tube's total-jobs is the sum, the kept counts stay exact."""
    with sqlq.Queue(db_url, durability="normal", clock=clock) as q:
        parent = q.put(b"p", tube="a")
        for put in (lambda tx: tx.put(b"ready", tube="a"),
                    lambda tx: tx.put(b"urgent", tube="a", priority=10),
                    lambda tx: tx.put(b"delayed", tube="a", delay=60),
                    lambda tx: tx.put(b"waiting", tube="a", after=parent),
                    lambda tx: tx.put_many([b"many"] * 3, tube="a", priority=10)):
            with q.transaction() as tx:
                before = _writes_besides_jobs(tx)
                put(tx)
                assert _writes_besides_jobs(tx) - before == 1
        with q.transaction() as tx:  # the second counting statement on: deltas, folded
            tx.put(b"t", tube="a")
            tx.put(b"w", tube="a", after=parent)
            tx.put_many([b"d"] * 2, tube="b", delay=60)
        assert q.stats_tube("a")["total-jobs"] == 10
        assert q.stats_tube("b")["total-jobs"] == 2
        check_counts(db_url, clock(), q)


@pytest.mark.postgres_only
def test_postgres_claim_is_never_jit_compiled(pg_url: str) -> None:
    """The claim functions run without JIT: with a big backlog their generic plan's cost
    passed jit_above_cost and every claim compiled its plan (42 ms of a 45 ms claim at 1M
    ready and 1M delayed jobs). Here the threshold is 0, so any JIT would show in the
    claim's nested plans (auto_explain, sent to this session as notices)."""
    import psycopg

    with sqlq.Queue(pg_url, durability="normal") as q:
        q.put(b"x", tube="t")
    notices: list[str] = []
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.add_notice_handler(lambda d: notices.append(d.message_primary or ""))
        for setting in ("auto_explain.log_min_duration = 0",
                        "auto_explain.log_nested_statements = on",
                        "auto_explain.log_analyze = on", "auto_explain.log_level = notice",
                        "jit = on", "jit_above_cost = 0"):
            conn.execute(f"SET {setting}")  # noqa: S608 - constants
        conn.execute("LOAD 'auto_explain'")
        claimed = conn.execute("SELECT id FROM sqlq_claim(ARRAY['t'], 1, 'o')").fetchall()
    assert len(claimed) == 1
    plans = [n for n in notices if "sqlq_jobs" in n]
    assert plans and not [n for n in plans if "JIT:" in n], plans


def _at_schema_1(url: str) -> None:
    """The database as the 0.1.0 release leaves it (migration 0001 only), holding jobs of
    every state in two tubes, put by raw SQL (no trigger counts them)."""
    rows = [(tube, priority, state, 1_700_000_060_000 if state == 1 else None,
             1_700_000_060_000 if state == 2 else None)
            for tube in ("old", "other") for priority in (5, 1024)
            for state in (0, 0, 0, 1, 1, 2, 3)]
    insert = ("INSERT INTO sqlq_jobs (tube, priority, state, delay_until, reserved_until, ttr,"
              " body, created_at) VALUES ({p}, {p}, {p}, {p}, {p}, 60000, {p}, 0)")
    if url.startswith("postgresql"):
        import psycopg

        from sqlq.backends.postgres import migrate as pg_migrate

        first = pg_migrate.load_migrations()[0]
        with psycopg.connect(url, autocommit=True) as pg, pg.transaction():
            pg.execute(pg_migrate._CREATE_VERSION_TABLE)  # noqa: SLF001 - the release's own
            pg.execute(first.sql)  # type: ignore[arg-type]  # DDL, no parameters
            pg.execute("INSERT INTO sqlq_schema VALUES (1, %s, 0)", (first.name,))
            for tube, priority, state, delay_until, reserved_until in rows:
                pg.execute(insert.format(p="%s"),  # type: ignore[arg-type]
                           (tube, priority, state, delay_until, reserved_until, b"x"))
        return
    import apsw

    from sqlq.backends.sqlite import migrate

    first = migrate.load_migrations()[0]
    conn = apsw.Connection(url)
    with conn:
        conn.execute(migrate._CREATE_VERSION_TABLE)  # noqa: SLF001 - the release's own
        conn.execute(first.sql)
        conn.execute("INSERT INTO sqlq_schema VALUES (1, ?, 0)", (first.name,))
        for tube, priority, state, delay_until, reserved_until in rows:
            conn.execute(insert.format(p="?"),
                         (tube, priority, state, delay_until, reserved_until, b"x"))
    conn.close()


@pytest.fixture
def empty_url(backend: str, tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[str]:
    yield from empty_database(backend, tmp_path, request)


def test_migration_0005_counts_the_jobs_already_there(empty_url: str, clock: FakeClock) -> None:
    """A store made by 0.1.0 holding jobs of every state: opened by this sqlq, its jobs
    are counted once by the migration, and stats read them right, as of now."""
    db_url = empty_url
    _at_schema_1(db_url)
    with sqlq.Queue(db_url, durability="normal", clock=clock) as q:
        check_counts(db_url, clock(), q)
        assert q.stats_tube("old")["current-jobs-ready"] == 6
        clock.advance(120)  # the delayed ones came due, the reservations ran out
        check_counts(db_url, clock(), q)
        assert q.stats_tube("old")["current-jobs-ready"] == 6 + 4 + 2
