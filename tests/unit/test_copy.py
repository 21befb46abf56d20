"""`sqlq copy`: a SQLite file to PostgreSQL and back, losing nothing; and `sqlq maintain`."""

from __future__ import annotations

import json
from typing import Any

import psycopg
import pytest
from click.testing import CliRunner

import sqlq
from sqlq.cli import cli
from sqlq.copy import copy
from tests.timing import FakeClock


def _everything(q: sqlq.Queue) -> dict[str, Any]:
    """All a user can observe of a queue, as of the clock's now."""
    jobs = {}
    for job_id in range(1, q.stats()["total-jobs"] + 1):
        job = q.peek(job_id)
        if job is not None:
            jobs[job_id] = (job.tube, job.body, job.priority, job.state, job.delay_until,
                            job.ttr, job.created_at, job.reserves, job.timeouts, job.releases,
                            job.buries, job.kicks, job.bury_reason, job.unique_key)
    return {
        "jobs": jobs,
        "stats": {k: v for k, v in q.stats().items() if k not in ("pid", "db")},
        "tubes": {t: q.stats_tube(t) for t in q.tubes()},
        "subscriptions": q.subscriptions(),
    }


def _fill(q: sqlq.Queue, clock: FakeClock) -> dict[str, int]:
    ids = {
        "ready": q.put(b"ready", tube="a", priority=5),
        "delayed": q.put(b"\x00binary\xff", tube="a", delay=60),
        "unique": q.put(b"u", tube="b", unique_key="key-1"),
        "buried": q.put(b"to bury", tube="b"),
        "reserved": q.put(b"held", tube="c", ttr=300),
        "done": q.put(b"done", tube="c"),
    }
    q.reserve_job(ids["buried"]).bury(reason="bad input")
    q.reserve("c", timeout=0)  # "reserved": held when the copy is made
    done = q.reserve("c", timeout=0)
    assert done is not None
    done.complete(b"the result")
    q.delete(q.put(b"gone", tube="a"))  # an id issued and gone: the counter must keep it
    q.pause_tube("a", 120)
    q.limit("a", concurrency=3)  # limits go too (sqlq/core/limits.py)
    q.limit("limited", concurrency=2, rate=(20, 1))
    q.subscribe("orders", "b")
    q.subscribe("orders", "c")
    q.enqueue_periodic("cleanup", 60_000, b"{}", tube="cron", priority=1, ttr=10,
                       unique_key="periodic:cleanup:60000")
    return ids


def test_sqlite_to_postgres_and_back_loses_nothing(tmp_path: Any, pg_url: str,
                                                   clock: FakeClock) -> None:
    source = str(tmp_path / "app.db")
    back = str(tmp_path / "back.db")
    with sqlq.Queue(source, clock=clock) as q:
        ids = _fill(q, clock)
        before = _everything(q)
    copy(source, pg_url, clock=clock)
    copy(pg_url, back, clock=clock)
    for location in (pg_url, back):
        with sqlq.Queue(location, clock=clock) as q:
            after = _everything(q)
            # A reserved job is copied as ready: its holder cannot ack it in the target.
            assert after["jobs"][ids["reserved"]][3] == "ready"
            expected = dict(before["jobs"])
            expected[ids["reserved"]] = after["jobs"][ids["reserved"]]
            assert after["jobs"] == expected
            assert after["subscriptions"] == before["subscriptions"]
            assert after["stats"]["total-jobs"] == before["stats"]["total-jobs"]
            assert q.result(ids["done"], timeout=0) == b"the result"
            assert q.stats_tube("a")["pause-time-left"] > 0
            assert q.limits() == {"a": {"concurrency": 3, "rate": None},
                                  "limited": {"concurrency": 2, "rate": (20, 1.0)}}
            assert q.put(b"u again", tube="b", unique_key="key-1") == ids["unique"]
            assert q.enqueue_periodic("cleanup", 60_000, b"{}", tube="cron", priority=1,
                                      ttr=10, unique_key="periodic:cleanup:60000") is None
            assert q.put(b"new") == before["stats"]["total-jobs"] + 1  # no id issued twice


def test_a_target_that_holds_anything_is_refused_and_left_as_it_was(tmp_path: Any,
                                                                    pg_url: str) -> None:
    source = str(tmp_path / "app.db")
    with sqlq.Queue(source) as q:
        q.put(b"x")
    with sqlq.Queue(pg_url) as target:
        target.delete(target.put(b"already here"))  # empty, but an id was issued
    with pytest.raises(sqlq.Error, match="already holds"):
        copy(source, pg_url)
    with psycopg.connect(pg_url) as conn:
        assert conn.execute("SELECT count(*) FROM sqlq_jobs").fetchone() == (0,)
    with pytest.raises(sqlq.Error, match="same database"):
        copy(source, source)


def test_cli_copy_and_maintain(tmp_path: Any, db_url: str) -> None:
    source = str(tmp_path / "src.db")
    with sqlq.Queue(source) as q:
        q.put_many([b"a", b"b", b"c"], tube="t")
    runner = CliRunner()
    r = runner.invoke(cli, ["copy", source, db_url, "--json"])
    assert r.exit_code == 0, r.output
    assert json.loads(r.output) == {"job": 3, "edge": 0, "tube": 0, "result": 0, "subscription": 0,
                                    "periodic": 0, "step": 0, "group": 0, "total-jobs": 3}
    r = runner.invoke(cli, ["--db", db_url, "maintain", "--json"])
    assert r.exit_code == 0, r.output
    report = json.loads(r.output)
    assert report["db"]
    r = runner.invoke(cli, ["copy", source, str(tmp_path / "again.db")])  # newcomer.md #12
    assert r.exit_code == 0, r.output
    assert r.output.splitlines()[-1] == f"copied 3 jobs and the queue's state from {source} " \
        f"to {tmp_path / 'again.db'}"
    r = runner.invoke(cli, ["copy", str(tmp_path / "missing.db"), db_url])
    assert r.exit_code == 1 and "no database at" in r.output


def test_copy_carries_a_jobs_trace_context(tmp_path: Any, pg_url: str) -> None:
    """A job's trace (sqlq/core/tracing.py) survives sqlq copy, SQLite to PostgreSQL and back:
    the worker that reserves the copy still joins the producer's trace."""
    source, back = str(tmp_path / "a.db"), str(tmp_path / "b.db")
    header = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01\nvendor=x"
    with sqlq.Queue(source) as q:
        traced, plain = q.put(b"traced"), q.put(b"plain")
        q.backend.write(lambda c: q.backend.store.jobs.set_trace(c, [traced], header))
    copy(source, pg_url)
    copy(pg_url, back)
    with sqlq.Queue(back) as q:
        jobs = {j.id: j.trace for j in q.reserve_many(2, timeout=0)}
    assert jobs == {traced: header, plain: None}


def test_a_copy_goes_page_by_page_through_jobs_edges_and_results(
        tmp_path: Any, pg_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Pages of 2 rows: every job, edge and result comes across, none twice, each page
    starting past the last row's key (an edge's is two columns); progress is told after
    each page of jobs, its fraction of the id range rising to 1."""
    monkeypatch.setattr("sqlq.copy.PAGE", 2)
    source, back = str(tmp_path / "a.db"), str(tmp_path / "b.db")
    with sqlq.Queue(source) as q:
        parents = q.put_many([b"p1", b"p2", b"p3"], tube="p")
        children = q.put_many([b"c1", b"c2", b"c3"], tube="c", after=parents)
        for body in (b"r1", b"r2", b"r3", b"r4", b"r5"):
            job = q.reserve_job(q.put(body, tube="r"))
            job.complete(body.upper())
        q.delete(q.put(b"gone"))
        stepped = q.reserve_job(parents[0])  # three step rows: two pages, a key of three columns
        stepped.step("a", lambda: 1)
        stepped.step("b", lambda: 2)
        stepped.save_cursor("row", 3)
        stepped.release()
    told: list[tuple[int, float | None]] = []
    report = copy(source, pg_url, progress=lambda n, fraction: told.append((n, fraction)))
    assert (report.counts["job"], report.counts["edge"], report.counts["result"],
            report.counts["step"]) == (6, 9, 5, 3)
    assert [n for n, _ in told] == [2, 4, 6]
    fractions = [f for _, f in told]
    assert fractions == sorted(fractions) and fractions[0] > 0 and fractions[-1] < 1
    copy(pg_url, back)
    with sqlq.Queue(back) as q:
        for child in children:
            assert q.links(child).parents == parents
        assert [q.result(i, timeout=0) for i in range(7, 12)] == [b"R1", b"R2", b"R3", b"R4",
                                                                   b"R5"]
        assert q.stats()["total-jobs"] == 12
        assert [row[1] for row in q.views.steps(parents[0])] == ["a", "b", "row"]
        job = q.reserve_job(parents[0])
        assert job.cursor("row") == 3 and job.step("b", lambda: "not run") == 2


@pytest.mark.pg_fresh
def test_postgres_imports_a_page_of_jobs_in_one_statement(
        tmp_path: Any, pg_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A statement trigger counts puts (sqlq_count_puts, an upsert of one counter row):
    one INSERT a job made a new version of that row per job in the copy's transaction,
    each upsert walking the versions before it (100,000 jobs took 86 s; now 6). Counted
    here by a statement trigger of the test's own."""
    monkeypatch.setattr("sqlq.copy.PAGE", 100)
    source = str(tmp_path / "a.db")
    with sqlq.Queue(source) as q:
        q.put_many([b"%d" % i for i in range(1000)], tube="t")
    sqlq.Queue(pg_url).close()  # the schema, and nothing in it
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("CREATE TABLE t_statements (n int)")
        conn.execute("CREATE FUNCTION t_count() RETURNS trigger LANGUAGE plpgsql AS $$ "
                     "BEGIN INSERT INTO t_statements VALUES (1); RETURN NULL; END $$")
        conn.execute("CREATE TRIGGER t_count AFTER INSERT ON sqlq_jobs FOR EACH STATEMENT "
                     "EXECUTE FUNCTION t_count()")
    copy(source, pg_url)
    with psycopg.connect(pg_url) as conn:
        assert conn.execute("SELECT count(*) FROM t_statements").fetchone() == (10,)
    with sqlq.Queue(pg_url) as q:
        assert q.stats_tube("t")["total-jobs"] == 1000
        assert [j.body for j in q.reserve_many(3, ["t"], timeout=0)] == [b"0", b"1", b"2"]
