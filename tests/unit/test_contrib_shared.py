"""sqlq.contrib._shared: the rule every framework integration follows for a put."""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

import sqlq
from sqlq.contrib._shared import put, same_database


def test_same_database_sqlite_file(tmp_path: Path) -> None:
    path = tmp_path / "app.db"
    sqlq.Queue(str(path), driver="sqlite3").close()
    os.symlink(path, tmp_path / "link.db")
    conn = sqlite3.connect(path)
    try:
        assert same_database(str(path), conn)
        assert same_database(str(tmp_path / "link.db"), conn)  # another spelling, same file
        assert not same_database(str(tmp_path / "other.db"), conn)
        assert not same_database("postgresql://localhost/app", conn)
    finally:
        conn.close()
    memory = sqlite3.connect(":memory:")
    assert not same_database(":memory:", memory)
    memory.close()
    assert not same_database(str(path), object())


def test_same_database_postgres(pg_url: str, pg_server: object) -> None:
    with psycopg.connect(pg_url) as conn:
        assert same_database(pg_url, conn)
        assert same_database(pg_url.replace("127.0.0.1", "localhost"), conn)
        assert not same_database(pg_url.rsplit("/", 1)[0] + "/postgres", conn)
        assert not same_database("app.db", conn)


class Hooks:
    """An application transaction's on-commit hook: callbacks run when it says so."""

    def __init__(self) -> None:
        self.pending: list[Callable[[], None]] = []

    def __call__(self, fn: Callable[[], None]) -> None:
        self.pending.append(fn)

    def commit(self) -> None:
        while self.pending:
            self.pending.pop(0)()


def put_via(q: sqlq.Queue, hooks: Hooks, body: bytes, **options: Any) -> int | None:
    return put(lambda: q, body, max_job_size=q.max_job_size, on_commit=hooks, **options)


def test_put_separate_queue_waits_for_commit(q: sqlq.Queue) -> None:
    hooks = Hooks()
    assert put_via(q, hooks, b"now", conn=None, in_transaction=False) == 1
    assert put_via(q, hooks, b"later", conn=None, in_transaction=True, tube="t") is None
    assert q.peek_ready("t") is None
    hooks.commit()
    job = q.reserve("t", timeout=0)
    assert job is not None and job.body == b"later"
    # A bad argument fails in the request, before anything waits for the commit.
    with pytest.raises(sqlq.InvalidTube):
        put_via(q, hooks, b"x", conn=None, in_transaction=True, tube="-bad")
    with pytest.raises(TypeError):
        put_via(q, hooks, b"x", conn=None, in_transaction=True, priority="high")
    with pytest.raises(TypeError):
        put_via(q, hooks, b"x", conn=None, in_transaction=True, after="1")
    assert hooks.pending == []


@pytest.fixture
def shared_file(tmp_path: Path) -> Iterator[tuple[sqlq.Queue, sqlite3.Connection]]:
    """A Queue and the application's own autocommit connection to the same file."""
    path = str(tmp_path / "app.db")
    q = sqlq.Queue(path, driver="sqlite3")
    conn = sqlite3.connect(path, isolation_level=None)
    yield q, conn
    conn.close()
    q.close()


def test_put_same_database_joins_the_transaction(
        shared_file: tuple[sqlq.Queue, sqlite3.Connection]) -> None:
    q, conn = shared_file
    hooks = Hooks()
    conn.execute("BEGIN")
    jid = put_via(q, hooks, b"rolled back", conn=conn, in_transaction=True)
    assert isinstance(jid, int)
    conn.execute("ROLLBACK")
    assert q.peek(jid) is None
    conn.execute("BEGIN")
    jid = put_via(q, hooks, b"kept", conn=conn, in_transaction=True)
    conn.execute("COMMIT")
    assert hooks.pending == []  # nothing deferred: the job was in the transaction
    job = q.peek(jid)
    assert job is not None and job.body == b"kept"


def test_put_after_waits_for_parents_whichever_way_it_is_made(q: sqlq.Queue) -> None:
    hooks = Hooks()
    parent = q.put(b"parent")
    now = put_via(q, hooks, b"now", conn=None, in_transaction=False, after=parent)
    assert now is not None and q.links(now).parents == [parent]
    assert put_via(q, hooks, b"later", conn=None, in_transaction=True, tube="t",
                   after=[parent]) is None
    hooks.commit()
    assert q.links(parent).children == [now, now + 1]
    assert q.stats_tube("t")["current-jobs-waiting"] == 1


def test_put_after_through_the_applications_connection(
        shared_file: tuple[sqlq.Queue, sqlite3.Connection]) -> None:
    q, conn = shared_file
    parent = q.put(b"parent")
    conn.execute("BEGIN")
    child = put_via(q, Hooks(), b"child", conn=conn, in_transaction=True, after=parent)
    conn.execute("COMMIT")
    assert child is not None and q.stats_job(child)["state"] == "waiting"
    with pytest.raises(sqlq.JobNotFound):
        put_via(q, Hooks(), b"orphan", conn=conn, in_transaction=False, after=99)
