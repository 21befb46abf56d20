"""The counts kept per tube and state (migration 0005, issue 39) stay exact through every
verb that moves a job: after a randomized run of all of them, the kept counts equal a real
COUNT(*) of the rows, and stats/stats_tube (which read the kept counts plus what is due as
of now) equal the counts worked out from the rows themselves."""

from __future__ import annotations

import random
import sqlite3
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import sqlq
from sqlq.copy import copy

from ..conftest import is_postgres, spawn
from ..oldschema import empty_database
from ..timing import FakeClock

TUBES = ("a", "b", "c", "old", "other")
STATS_KEYS = ("current-jobs-ready", "current-jobs-urgent", "current-jobs-reserved",
              "current-jobs-delayed", "current-jobs-buried")

DIES_HOLDING = """
import os, sys, sqlq
q = sqlq.Queue(sys.argv[1], durability="normal")
q.reserve_many(3, ["a", "b", "c"], timeout=0)
os._exit(0)
"""

_KEPT = """SELECT tube, state, urgent, sum(n) FROM sqlq_job_counts
            GROUP BY tube, state, urgent HAVING sum(n) <> 0"""
_ROWS = "SELECT tube, state, priority, delay_until, reserved_until FROM sqlq_jobs"


def _read(url: str, queue: sqlq.Queue | None = None
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
    kept, rows = _read(url, queue)
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


def _random_run(q: sqlq.Queue, url: str, clock: FakeClock, seed: int, steps: int) -> None:
    rnd = random.Random(seed)
    held: list[sqlq.Job] = []
    for step in range(steps):
        tube = rnd.choice(TUBES)
        priority = rnd.choice((0, 100, 1023, 1024, 5000))
        verb = rnd.choice(("put", "put", "put_delayed", "put_unique", "put_many", "put_many_big",
                           "put_after", "reserve", "reserve", "reserve_many", "delete",
                           "delete_many", "delete_id", "release", "release_delayed", "bury",
                           "kick", "kick_job", "touch", "cancel", "postpone", "advance",
                           "dead_owner", "put_replace", "snooze"))
        if verb == "put":
            q.put(b"x", tube=tube, priority=priority)
        elif verb == "put_delayed":
            q.put(b"x", tube=tube, priority=priority, delay=rnd.choice((1, 5, 30)))
        elif verb == "put_unique":
            q.put(b"x", tube=tube, priority=priority, unique_key=str(rnd.randrange(4)))
        elif verb == "put_replace":  # debounce: the key's holder changed in place, or a
            # follow-up of a reserved or buried one
            q.put(b"x", tube=tube, priority=priority, unique_key=str(rnd.randrange(4)),
                  delay=rnd.choice((0, 0, 2)), on_conflict="replace")
        elif verb == "put_many":
            q.put_many([b"x"] * rnd.randrange(1, 5), tube=tube, priority=priority,
                       delay=rnd.choice((0, 0, 3)))
        elif verb == "put_many_big":  # past QUIET_BATCH: SQLite puts with its triggers off
            q.put_many([b"x"] * 70, tube=tube, priority=priority, delay=rnd.choice((0, 3)))
        elif verb == "put_after" and held:
            q.put(b"child", tube=tube, priority=priority, after=rnd.choice(held).id,
                  delay=rnd.choice((0, 2)))
        elif verb == "reserve":
            job = q.reserve(list(TUBES), timeout=0)
            if job is not None:
                held.append(job)
        elif verb == "reserve_many":
            held.extend(q.reserve_many(rnd.randrange(1, 8), list(TUBES), timeout=0))
        elif verb == "delete_many" and held:
            batch = [held.pop() for _ in range(min(len(held), 3))]
            _quietly(q.delete_many, batch)
        elif held and verb in ("delete", "release", "release_delayed", "bury", "touch",
                               "cancel", "snooze"):
            job = held.pop(rnd.randrange(len(held)))
            if verb == "delete":
                _quietly(job.delete)
            elif verb == "release":
                _quietly(job.release, priority=priority)
            elif verb == "release_delayed":
                _quietly(job.release, delay=rnd.choice((1, 10)))
            elif verb == "bury":
                _quietly(job.bury, priority=priority)
            elif verb == "touch":
                _quietly(job.touch)
                held.append(job)
            elif verb == "snooze":
                _quietly(job.snooze, rnd.choice((0, 3)))
            else:
                _quietly(q.cancel, job.id)
        elif verb in ("delete_id", "kick_job", "cancel", "postpone"):
            job_id = rnd.randrange(1, step + 2)
            call = {"delete_id": q.delete, "kick_job": q.kick_job, "cancel": q.cancel,
                    "postpone": lambda i: q.postpone(i, rnd.choice((0, 4)))}[verb]
            _quietly(call, job_id)
        elif verb == "kick":
            q.kick(rnd.randrange(1, 20), tube)
        elif verb == "advance":  # delayed jobs come due, leases run out
            clock.advance(rnd.choice((1, 3, 30, 130)))
        elif verb == "dead_owner":  # a process that dies holding jobs: reaped by a claim
            dying = spawn(DIES_HOLDING, url)
            assert dying.wait(timeout=60) == 0
        if step % 25 == 0:
            check_counts(url, clock(), q)


def _quietly(call: Any, *args: Any, **kwargs: Any) -> None:
    """A verb on a job that may be gone, expired or cancelled meanwhile: its error is the
    verb's answer, not the test's; what matters is what it left in the counts."""
    try:
        call(*args, **kwargs)
    except (sqlq.JobNotFound, sqlq.JobLost):
        pass


@pytest.mark.slow
@pytest.mark.parametrize("seed", [1, 2])
def test_kept_counts_equal_count_star_after_every_verb(db_url: str, clock: FakeClock,
                                                        seed: int, tmp_path: Path,
                                                        backend: str) -> None:
    with sqlq.Queue(db_url, durability="normal", clock=clock) as q:
        _random_run(q, db_url, clock, seed, 300)
        check_counts(db_url, clock(), q)
        copied = str(tmp_path / "copy.db")
        copy(db_url, copied, clock=clock)  # copy: the target counts what it received
        check_counts(copied)
        backup = tmp_path / "backup.db"
        q.backup(backup)  # a backup restored is a file opened as a queue
        check_counts(str(backup))
        with sqlq.Queue(str(backup), durability="normal", clock=clock) as restored:
            restored.put(b"after restore", tube="a")
            check_counts(str(backup), clock(), restored)
        # the whole drain: every job out, through the claim and the operator's delete
        while held := q.reserve_many(50, list(TUBES), timeout=0):
            q.delete_many(held)
        for tube in TUBES:
            while q.kick(1000, tube):
                pass
        for job_id in range(1, 100_000):
            if q.stats()["current-jobs-ready"] + q.stats()["current-jobs-delayed"] == 0:
                break
            _quietly(q.delete, job_id)
        check_counts(db_url, clock(), q)
    if not is_postgres(backend):
        assert _read(db_url)[0] == Counter()



def test_chaos_checker_finds_a_kept_count_off(db_url: str) -> None:
    """The chaos suite's end-of-round check (tests/chaos_checker.py) reads both counts in one
    snapshot and names each key whose kept count is off."""
    from ..chaos_checker import broken_job_counts

    with sqlq.Queue(db_url, durability="normal") as q:
        q.put_many([b"x"] * 3, tube="a")
        q.put(b"y", tube="a", priority=5000, delay=60)
        assert broken_job_counts(db_url) == []
        with q.transaction() as tx:
            tx.execute("UPDATE sqlq_job_counts SET n = n + 1 WHERE state = 1")
    [problem] = broken_job_counts(db_url)  # ('a', ...) or, in SQL_ASCII, (b'a', ...)
    assert problem.startswith("kept count of (") and problem.endswith("a', 1, 0) is 2, COUNT(*) 1")


def _counter_writes(tx: Any) -> int:
    """Rows inserted or updated in the counter tables, by this session's transactions
    whose statistics are not sent yet (the current one and maybe some before it)."""
    [(writes,)] = tx.execute(
        "SELECT coalesce(sum(n_tup_ins + n_tup_upd), 0) FROM pg_stat_xact_user_tables"
        " WHERE relname IN ('sqlq_job_counts', 'sqlq_tube_puts')")
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
