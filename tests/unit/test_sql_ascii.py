"""Text in and out of the database, whatever its encoding (issue 22, F8).

A PostgreSQL cluster made by ``initdb --no-locale`` has every database in
SQL_ASCII, where a client that keeps the default client encoding gets ``text`` back
as bytes. sqlq asks for UTF8 on every connection it opens, so its text (tubes,
unique keys, bury reasons, owner tokens) reads back as str there too; through the
application's own connection (``sqlq.put(conn)``), whose settings are not sqlq's to
change, it reads back no text at all.

The tests taking ``q`` run on every backend, ``postgres-ascii`` included (conftest);
the others are about a SQL_ASCII database itself.
"""

from __future__ import annotations

import time

import psycopg
import pytest

import sqlq
from tests.timing import PATIENCE, soon

#: Text beyond ASCII, in the places a user's text goes (tube names are ASCII by rule).
KEY = "clé ✓ 日本"
REASON = "pas de destinataire: ü, ✓, 日本 🙂"


def _raw(url: str) -> psycopg.Connection[tuple[object, ...]]:
    """A plain psycopg connection with the server's default client encoding: an
    application's own, or any other program's."""
    return psycopg.connect(url, autocommit=True)


def test_the_ascii_databases_give_plain_clients_bytes(pg_ascii_url: str) -> None:
    """The backend ``postgres-ascii`` is what F8 met: SQL_ASCII, text read back as bytes
    by a client that does not ask for UTF8 (so the tests below test something)."""
    with _raw(pg_ascii_url) as conn:
        assert conn.execute("SHOW server_encoding").fetchone() == (b"SQL_ASCII",)
        assert conn.execute("SELECT 'emails'::text").fetchone() == (b"emails",)


def test_text_comes_back_as_str(q: sqlq.Queue) -> None:
    jid = q.put(b"x", tube="emails", unique_key=KEY)
    job = q.reserve("emails", timeout=0)
    assert job is not None and job.id == jid
    assert (job.tube, job.unique_key) == ("emails", KEY)
    assert type(job.tube) is str and type(job.unique_key) is str
    job.bury(reason=REASON)
    buried = q.peek_buried("emails")
    assert buried is not None
    assert (buried.tube, buried.bury_reason, buried.unique_key) == ("emails", REASON, KEY)
    assert q.stats_job(jid)["tube"] == "emails"
    with pytest.raises(sqlq.JobBuried) as raised:
        q.result(jid, timeout=0)
    assert raised.value.reason == REASON


def test_tubes_lists_names(q: sqlq.Queue) -> None:
    q.put(b"x", tube="emails")
    q.pause_tube("paused", 60)
    q.subscribe("orders", tube="audit")
    assert q.tubes() == ["audit", "default", "emails", "paused"]


def test_publish_fills_every_subscribed_tube(q: sqlq.Queue) -> None:
    q.subscribe("orders", tube="emails")
    q.subscribe("orders", tube="audit")
    ids = q.publish("orders", b"order 7", unique_key=KEY)
    assert len(ids) == 2
    assert q.subscriptions("orders") == [("orders", "audit"), ("orders", "emails")]
    assert q.publish("orders", b"order 7 again", unique_key=KEY) == ids
    for tube in ("audit", "emails"):
        job = q.reserve(tube, timeout=0)
        assert job is not None and (job.tube, job.body, job.unique_key) == (
            tube, b"order 7", KEY)


def test_a_closed_holders_job_is_given_back_at_once(db_url: str) -> None:
    """The dead-holder reaper reads owner tokens back: on SQL_ASCII they came back as
    bytes and every reserve that met a dead holder raised (text = bytea)."""
    with sqlq.Queue(db_url, durability="normal") as q:
        jid = q.put(b"x", tube="t", ttr=300)
        holder = sqlq.Queue(db_url, durability="normal")
        held = holder.reserve("t", timeout=0)
        assert held is not None and held.id == jid
        assert q.reserve("t", timeout=0) is None  # a live holder keeps it
        holder._backend.close()  # its session (and owner lock) ends; no release is sent
        # The server drops the lock when the backend has exited, a moment after the close.
        job = q.reserve("t", timeout=soon(1))
        assert job is not None and job.id == jid and job.reserves == 2


def test_text_is_stored_as_utf8_on_sql_ascii(pg_ascii_url: str) -> None:
    """SQL_ASCII stores the client's bytes as they come: sqlq's are UTF-8, so any UTF8
    client (psql, another sqlq) reads the same text."""
    with sqlq.Queue(pg_ascii_url) as q:
        jid = q.put(b"\xff\x00 body", tube="t", unique_key=KEY)
        job = q.reserve("t", timeout=0)
        assert job is not None and job.body == b"\xff\x00 body"
        job.bury(reason=REASON)
    with _raw(pg_ascii_url) as conn:
        row = conn.execute("SELECT tube, unique_key, bury_reason FROM sqlq_jobs WHERE id = %s",
                           (jid,)).fetchone()
    assert row == (b"t", KEY.encode(), REASON.encode())


def test_put_through_the_applications_connection_on_sql_ascii(pg_ascii_url: str) -> None:
    """``sqlq.put(conn)`` leaves the application's session as it was (SQL_ASCII: bytes)
    and reads no text through it; its key is the same UTF-8 a Queue's is."""
    with sqlq.Queue(pg_ascii_url) as q, _raw(pg_ascii_url) as conn:
        jid = sqlq.put(conn, "é".encode(), tube="t", unique_key=KEY)
        assert sqlq.put(conn, b"again", tube="t", unique_key=KEY) == jid
        assert q.put(b"from the queue", tube="t", unique_key=KEY) == jid
        plain = sqlq.put(conn, b"plain", tube="t")  # sqlq's SQL must be ASCII here
        [many] = sqlq.put_many(conn, [b"y"], tube="t")
        assert conn.execute("SHOW client_encoding").fetchone() == (b"SQL_ASCII",)
        job = q.peek(jid)
        assert job is not None and (job.tube, job.unique_key, job.body) == (
            "t", KEY, "é".encode())
        assert q.stats_tube("t")["current-jobs-ready"] == 3 and jid < plain < many


def test_maintain_names_a_transaction_whose_query_a_cut_splits(pg_ascii_url: str) -> None:
    """``sqlq maintain`` shows the first 80 bytes of the query of the transaction that
    holds the horizon (a REPEATABLE READ snapshot): on SQL_ASCII a cut inside a UTF-8
    character made the whole report fail."""
    query = "SELECT '" + "x" * 71 + "é' AS cut"  # the 80th byte is é's first
    with sqlq.Queue(pg_ascii_url) as q, _raw(pg_ascii_url) as other:
        other.autocommit = False
        other.isolation_level = psycopg.IsolationLevel.REPEATABLE_READ
        other.execute(query.encode())  # an application's UTF-8 text, as bytes
        pid = other.info.backend_pid
        deadline = time.monotonic() + PATIENCE
        while True:  # another test's transaction may be older for a moment
            oldest = q.backend.maintain()["oldest-transaction"]
            if f"pid {pid} " in (oldest or "") or time.monotonic() > deadline:
                break
            time.sleep(0.05)
    assert oldest.endswith(f"idle in transaction: SELECT '{'x' * 71}\N{REPLACEMENT CHARACTER}")
