"""Migrations: applied in order on open, recorded, and refusing files they must not touch."""

from __future__ import annotations

import hashlib
import os
import re
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

import sqlq
from sqlq.backends.sqlite import migrate

from ..oldschema import (
    PG_PRE_RELEASE,
    SQLITE_PRE_RELEASE,
    START_MS,
    build_old,
    empty_database,
    links,
)
from ..timing import FakeClock


def _digest(path: str) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def test_fresh_file_gets_every_migration_recorded(db_path: str) -> None:
    sqlq.Queue(db_path).close()
    conn = sqlite3.connect(db_path)
    rows = conn.execute("SELECT version, name FROM sqlq_schema ORDER BY version").fetchall()
    assert [r[0] for r in rows] == list(range(1, migrate.LATEST + 1))
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    conn.close()


def test_a_new_file_has_small_pages_and_an_older_one_keeps_its_own(db_path: str,
                                                                   tmp_path: Path) -> None:
    """sqlq makes its files with 2 KiB pages (db.PAGE_SIZE: half of what a commit writes
    at SQLite's default); a file made with other pages (an application's, for ``init``,
    or one sqlq 0.1.0 made) keeps them and works as before."""
    from sqlq.backends.sqlite.db import PAGE_SIZE

    def page_size(path: str) -> int:
        conn = sqlite3.connect(path)
        try:
            return int(conn.execute("PRAGMA page_size").fetchone()[0])
        finally:
            conn.close()

    sqlq.Queue(db_path).close()
    assert page_size(db_path) == PAGE_SIZE == 2048
    app = str(tmp_path / "app.db")
    _write_with_sqlite3(app, "PRAGMA page_size = 4096", "CREATE TABLE orders (id INTEGER)")
    with sqlq.Queue(app, init=True) as q:
        q.put_many([b"x" * 3000] * 50)
        held = q.reserve_many(50, timeout=0)
        assert len(held) == 50
        q.delete_many(held)
        assert q.stats()["current-jobs-ready"] == 0
    assert page_size(app) == 4096


def test_file_and_sidecars_are_0600(db_path: str) -> None:
    with sqlq.Queue(db_path) as q:
        q.put(b"x")
        assert q.reserve(timeout=0) is not None
        for suffix in ("", "-wal", "-shm"):
            assert os.stat(db_path + suffix).st_mode & 0o777 == 0o600, suffix
        assert os.stat(db_path + "-sqlq").st_mode & 0o777 == 0o700


def test_reopening_applies_nothing_twice(db_path: str) -> None:
    for _ in range(3):
        sqlq.Queue(db_path).close()
    conn = sqlite3.connect(db_path)
    assert conn.execute("SELECT count(*) FROM sqlq_schema").fetchone()[0] == migrate.LATEST
    conn.close()


def _write_with_sqlite3(path: str, *statements: str) -> None:
    conn = sqlite3.connect(path)
    for sql in statements:
        conn.execute(sql)
    conn.commit()
    conn.close()


def _assert_refused_untouched(path: str, match: str) -> None:
    before = _digest(path)
    with pytest.raises(sqlq.SchemaError, match=match):
        sqlq.Queue(path)
    assert _digest(path) == before


def test_newer_schema_is_refused_untouched(db_path: str) -> None:
    sqlq.Queue(db_path).close()
    _write_with_sqlite3(db_path, "INSERT INTO sqlq_schema VALUES (999, '0999_future', 0)")
    _assert_refused_untouched(db_path, "newer sqlq")


def test_foreign_database_is_refused_untouched(db_path: str) -> None:
    _write_with_sqlite3(db_path, "CREATE TABLE orders (id INTEGER PRIMARY KEY, total REAL)",
                        "INSERT INTO orders VALUES (1, 9.5)")
    _assert_refused_untouched(db_path, "another application's tables.*orders")


def test_init_adds_sqlq_tables_beside_the_applications(db_path: str) -> None:
    _write_with_sqlite3(db_path, "CREATE TABLE orders (id INTEGER PRIMARY KEY)",
                        "INSERT INTO orders VALUES (7)")
    with sqlq.Queue(db_path, init=True) as q:
        q.put(b"x")
    with sqlq.Queue(db_path) as q:  # no init needed any more
        assert q.stats()["current-jobs-ready"] == 1
    conn = sqlite3.connect(db_path)
    assert conn.execute("SELECT id FROM orders").fetchall() == [(7,)]
    conn.close()


def test_not_a_database_and_empty_file(tmp_path: Path) -> None:
    junk = tmp_path / "junk.db"
    junk.write_bytes(b"this is not a database file at all" * 200)
    with pytest.raises(sqlq.SchemaError, match="not a SQLite database"):
        sqlq.Queue(str(junk))
    empty = tmp_path / "empty.db"
    empty.write_bytes(b"")
    with pytest.raises(sqlq.SchemaError, match="empty file"):
        sqlq.Queue(str(empty))
    assert empty.read_bytes() == b""


# -- databases of other sqlq versions, with jobs in them ----------------------------------------

@pytest.fixture
def empty_url(backend: str, tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[str]:
    yield from empty_database(backend, tmp_path, request)


@pytest.mark.sqlite_only
@pytest.mark.parametrize("version", SQLITE_PRE_RELEASE)
def test_every_pre_release_sqlite_schema_is_refused_untouched(
        backend: str, empty_url: str, version: int) -> None:
    """A file a pre-release sqlq made (schema 1..15, squashed into 0001 before 0.1.0),
    with jobs in it: one line that says what it is and what to do, the file unchanged."""
    build_old(empty_url, version)
    _assert_refused_untouched(
        empty_url, rf"^{re.escape(empty_url)}: it was made by a pre-release sqlq \(SQLite schema "
                   rf"{version} from before 0\.1\.0\), which this sqlq cannot upgrade; finish "
                   r"its jobs with the sqlq that made it, then start a new database$")


@pytest.mark.postgres_only
@pytest.mark.parametrize("version", PG_PRE_RELEASE)
def test_every_pre_release_postgres_schema_is_refused_untouched(
        backend: str, empty_url: str, version: int) -> None:
    """A database a pre-release sqlq made (schema 1..19), as the file above: refused
    before anything is written (its schema records and jobs are as they were)."""
    build_old(empty_url, version)
    before = _pg_contents(empty_url)
    with pytest.raises(sqlq.SchemaError) as raised:
        sqlq.Queue(empty_url)
    message = str(raised.value)
    assert "\n" not in message and message.endswith(
        f"it was made by a pre-release sqlq (PostgreSQL schema {version} from before 0.1.0), "
        "which this sqlq cannot upgrade; finish its jobs with the sqlq that made it, then "
        "start a new database"), message
    assert _pg_contents(empty_url) == before


def _pg_contents(url: str) -> list[object]:
    import psycopg

    with psycopg.connect(url) as conn:
        return [conn.execute("SELECT * FROM sqlq_schema ORDER BY version").fetchall(),
                conn.execute("SELECT * FROM sqlq_jobs ORDER BY id").fetchall(),
                conn.execute("SELECT count(*) FROM pg_tables WHERE tablename LIKE 'sqlq%'"
                             ).fetchall()]


@pytest.mark.postgres_only
def test_newer_postgres_schema_is_refused_untouched(backend: str, empty_url: str) -> None:
    import psycopg

    build_old(empty_url)
    with psycopg.connect(empty_url) as conn:
        conn.execute("INSERT INTO sqlq_schema VALUES (999, '0999_future', 0)")
    before = _pg_contents(empty_url)
    with pytest.raises(sqlq.SchemaError, match=r"newer sqlq .schema 999, this sqlq knows \d+.; "
                                               "upgrade sqlq$"):
        sqlq.Queue(empty_url)
    assert _pg_contents(empty_url) == before


def test_jobs_of_a_database_reopened_keep_working(backend: str, empty_url: str) -> None:
    """A database at the current schema, with ready, delayed, buried and keyed jobs in it
    written beside the Queue, opens as it is: see check_old_jobs_work."""
    check_old_jobs_work(empty_url)


def check_old_jobs_work(empty_url: str) -> None:
    """A database with jobs in it opens; its jobs keep working, can be parents of new
    puts (after=) and release them; they wait on nothing."""
    build_old(empty_url)
    clock = FakeClock(START_MS)
    with sqlq.Queue(empty_url, durability="normal", clock=clock) as q:
        ready, delayed, buried, keyed = 1, 2, 3, 4
        assert links(empty_url) == [(i, 0, 0) for i in (1, 2, 3, 4)]
        stats = q.stats_tube("old")
        assert [stats[f"current-jobs-{s}"] for s in ("ready", "delayed", "buried", "waiting")
                ] == [2, 1, 1, 0]
        assert q.put(b"again", tube="old", unique_key="key") == keyed  # still holds its key
        child = q.put(b"child", tube="new", after=[ready, delayed, buried])
        grandchild = q.put(b"grandchild", tube="new", after=child, delay=5)
        with pytest.raises(sqlq.JobNotFound):
            q.put(b"x", after=grandchild + 1)  # an id never issued: nothing is put
        assert q.stats()["current-jobs-waiting"] == 2
        job = q.reserve("old", timeout=0)
        assert job is not None and job.id == ready
        job.delete()
        clock.advance(61)
        job = q.reserve("old", timeout=0)
        assert job is not None and job.id == delayed  # the old delay still holds
        job.complete(b"done")
        assert q.peek(child).state == "waiting"  # type: ignore[union-attr]
        q.kick_job(buried)
        job = q.reserve("old", timeout=0)
        assert job is not None and job.id == buried
        job.delete()  # the last parent gone: the child is ready, its child still waits
        assert [q.peek(i).state for i in (child, grandchild)  # type: ignore[union-attr]
                ] == ["ready", "waiting"]
        q.reserve("new", timeout=0).delete()  # type: ignore[union-attr]
        assert q.stats_job(grandchild)["time-left"] == 5  # delay counted from the release
        assert q.result(delayed, timeout=0) == b"done"
        assert links(empty_url)[0] == (keyed, 0, 0)


def test_latest_read_from_the_names_is_the_number_of_migrations() -> None:
    """LATEST comes from the files' names alone (reading each file cost every process
    that opens a Queue milliseconds: issue 34); load() reads and checks them."""
    from sqlq.backends import migrations
    from sqlq.backends.postgres import migrate as pg_migrate

    for module in (migrate, pg_migrate):
        directory = module.migrations_dir()
        assert migrations.latest(str(directory)) == len(module.load_migrations()) > 0
    assert len(migrate.load_migrations()) == migrate.LATEST
    assert migrations.latest("/no/such/directory") == 0
