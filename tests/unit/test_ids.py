"""Job ids are never issued twice (results are keyed by id, beanstalkd clients hold ids,
total-jobs counts them): not after the job holding the highest id is deleted, by any verb
that deletes, nor once the file is closed and opened again, nor across migration 0007,
which rebuilt the jobs table without AUTOINCREMENT. (A SIGKILL mid-put:
tests/integration/test_durability.py.)"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from pathlib import Path

import pytest

import sqlq
from sqlq.backends.sqlite import migrate

#: Every way the job holding the highest id leaves the table.
DELETES: dict[str, Callable[[sqlq.Queue, int], None]] = {
    "delete by id": lambda q, job_id: q.delete(job_id),
    "reserve, then job.delete()": lambda q, job_id: _reserved(q).delete(),
    "reserve_many, then delete_many": lambda q, job_id: q.delete_many(q.reserve_many(10)),
    "reserve(delete=job)": lambda q, job_id: _ignore(q.reserve(delete=_reserved(q), timeout=0)),
    "complete": lambda q, job_id: _reserved(q).complete(b"done"),
}


def _reserved(q: sqlq.Queue) -> sqlq.Job:
    job = q.reserve(timeout=0)
    assert job is not None
    return job


def _ignore(job: sqlq.Job | None) -> None:
    """The next job, if any, stays reserved: only the deletion matters here."""


@pytest.mark.parametrize("how", sorted(DELETES))
@pytest.mark.parametrize("left", ["some jobs left", "none left"])
def test_the_top_id_is_not_issued_again_after_a_delete_and_a_reopen(
        db_url: str, how: str, left: str) -> None:
    q = sqlq.Queue(db_url, durability="normal")
    try:
        if left == "some jobs left":
            q.put(b"stays", priority=2**32 - 1)  # claimed last: never the one deleted
        top = q.put_many([b"a", b"b"])[-1] if left == "none left" else q.put(b"top")
        if left == "none left":
            q.delete(top - 1)
        DELETES[how](q, top)
        assert q.stats()["total-jobs"] == top
        assert q.put(b"next") == top + 1
        q.delete(top + 1)
    finally:
        q.close()
    with sqlq.Queue(db_url, durability="normal") as again:
        assert again.stats()["total-jobs"] == top + 1
        assert again.put(b"after reopening") == top + 2


@pytest.mark.sqlite_only
def test_a_put_many_after_the_top_job_went_continues_the_ids(q: sqlq.Queue) -> None:
    ids = q.put_many([b"x"] * 5)
    for job_id in ids[2:]:
        q.delete(job_id)
    assert q.put_many([b"y"] * 3) == [ids[-1] + 1, ids[-1] + 2, ids[-1] + 3]


def _schema_6_file(path: str, jobs: int, sequence: int) -> list[tuple[object, ...]]:
    """A file as sqlq left it at schema 6 (AUTOINCREMENT), holding jobs in every state and a
    sequence ahead of its highest id (the highest jobs were deleted); its rows."""
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("CREATE TABLE sqlq_schema (version INTEGER PRIMARY KEY, name TEXT NOT NULL, "
                 "applied_at INTEGER NOT NULL)")
    for m in migrate.load_migrations()[:6]:
        conn.executescript(m.sql)
        conn.execute("INSERT INTO sqlq_schema VALUES (?, ?, 0)", (m.version, m.name))
    for i in range(1, jobs + 1):
        conn.execute(
            "INSERT INTO sqlq_jobs (tube, priority, state, delay_until, reserved_until, ttr, "
            "body, created_at, reserves, buries, lease, owner, bury_reason, unique_key, delay) "
            "VALUES (?, ?, ?, ?, ?, 60000, ?, 5, ?, ?, ?, ?, ?, ?, ?)",
            (f"t{i % 2}", i % 3, i % 4, 9e12 if i % 4 == 1 else None,
             9e12 if i % 4 == 2 else None, b"body %d" % i, i % 4 == 2, i % 4 == 3,
             7 if i % 4 == 2 else None, "w" if i % 4 == 2 else None,
             "why" if i % 4 == 3 else None, f"k{i}" if i % 5 == 0 else None, i))
    conn.execute("UPDATE sqlite_sequence SET seq = ? WHERE name = 'sqlq_jobs'", (sequence,))
    rows = conn.execute("SELECT * FROM sqlq_jobs ORDER BY id").fetchall()
    conn.close()
    return rows


@pytest.mark.sqlite_only
def test_migration_7_keeps_every_job_and_a_sequence_ahead_of_the_jobs(tmp_path: Path) -> None:
    path = str(tmp_path / "old.db")
    rows = _schema_6_file(path, jobs=20, sequence=57)
    with sqlq.Queue(path, durability="normal") as q:
        conn = q.backend.db.conn  # type: ignore[attr-defined]
        latest = [(migrate.LATEST,)]
        assert conn.execute("SELECT max(version) FROM sqlq_schema").fetchall() == latest
        kept = conn.execute("SELECT * FROM sqlq_jobs ORDER BY id").fetchall()
        assert [row[:len(rows[0])] for row in kept] == rows  # later migrations add columns
        schema = conn.execute("SELECT group_concat(sql) FROM sqlite_master").fetchall()[0][0]
        assert "AUTOINCREMENT" not in schema and "sqlq_jobs_autoincrement" not in schema
        assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
        assert q.stats()["total-jobs"] == 57
        assert q.put(b"new") == 58
        stats = q.stats()  # the jobs as the indexes see them: 5 of each state, and the new one
        assert [stats[f"current-jobs-{s}"] for s in ("ready", "reserved", "delayed", "buried")
                ] == [6, 5, 5, 5]
    with sqlq.Queue(path, durability="normal") as q:
        assert q.put(b"newer") == 59


@pytest.mark.sqlite_only
def test_migration_7_of_a_file_whose_jobs_all_went(tmp_path: Path) -> None:
    """Every job deleted, the sequence alone remembers the ids issued."""
    path = str(tmp_path / "old.db")
    _schema_6_file(path, jobs=0, sequence=0)
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("INSERT INTO sqlite_sequence (name, seq) VALUES ('sqlq_jobs', 1234)")
    conn.close()
    with sqlq.Queue(path, durability="normal") as q:
        assert q.put(b"first after") == 1235


def test_total_jobs_after_a_rolled_back_put(q: sqlq.Queue, backend: str) -> None:
    """SQLite counts the puts that committed; PostgreSQL counts the ids its sequence
    issued, and a rolled-back put used one up (docs/postgres.md, "Ids"; queries.sql, total_jobs:
    an exact count would be a counter row that every put's commit waits on)."""
    q.put(b"kept")
    with pytest.raises(RuntimeError), q.transaction() as tx:
        tx.put(b"rolled back")
        raise RuntimeError("the application's transaction fails")
    third = q.put(b"kept too")
    assert q.stats()["total-jobs"] == third == (2 if backend == "sqlite" else 3)
