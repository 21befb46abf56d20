"""Every named query: it parses, and none scans the jobs table (reserve cost stays flat)."""

from __future__ import annotations

import importlib
import json
import pkgutil
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import apsw
import psycopg
import pytest

from sqlq import Queue
from sqlq.backends import store as shared_store
from sqlq.backends.postgres.store import PostgresStore
from sqlq.backends.sql import compact, load_queries
from sqlq.backends.sqlite import store
from sqlq.backends.sqlite.store import SQLiteStore
from sqlq.model import ClaimRow

# Stats, the tube list and sqlq copy's emptiness check read every job once; they are for
# people and monitors, not the hot path.
MAY_SCAN = {"count_jobs", "list_tubes", "count_everything"}
#: The shared nouns' modules (backends/store/), each run over either dialect's statements.
SHARED = tuple(importlib.import_module(f"{shared_store.__name__}.{m.name}")
               for m in pkgutil.iter_modules(shared_store.__path__))


@pytest.mark.sqlite_only
@pytest.mark.parametrize("name", sorted(SQLiteStore.Q))
def test_query_plan_uses_indexes(q: Queue, name: str) -> None:
    sql = SQLiteStore.Q[name]
    params: dict[str, object] | tuple[None, ...] = {p: None for p in re.findall(r":(\w+)", sql)}
    if "tubes" in params:
        params["tubes"] = '["a", "b"]'  # type: ignore[call-overload]
    if not params:  # positional: ?, or numbered ?N (each number bound once)
        numbered = {int(n) for n in re.findall(r"\?(\d+)", sql)}
        params = (None,) * (max(numbered) if numbered else sql.count("?"))
    plan = [row[3] for row in q.backend.db.conn.execute("EXPLAIN QUERY PLAN " + sql, params)]
    # Walking the reserved-jobs index is bounded by the reservations held, not the queue;
    # walking the buried-jobs index (the failed-jobs page) by the jobs buried.
    scans = [step for step in plan if re.match(r"SCAN (sqlq_jobs|j|r)\b", step)
             and "INDEX sqlq_jobs_reserved" not in step and "INDEX sqlq_jobs_buried" not in step]
    if name not in MAY_SCAN:
        assert not scans, f"{name} scans the jobs table: {plan}"


@pytest.mark.sqlite_only
@pytest.mark.parametrize("name", sorted(SQLiteStore.Q))
def test_compact_statement_is_the_same_program(q: Queue, name: str) -> None:
    """The statements sqlq runs (sql.compact's) compile to the program their text in
    queries.sql compiles to, opcode for opcode."""
    written = load_queries(store.__file__.replace("store.py", "queries.sql"))[name]
    run = SQLiteStore.Q[name]
    assert len(run) <= len(written)
    names = set(re.findall(r":(\w+)", re.sub(r"'[^']*'", "", written)))
    numbered = [int(n) for n in re.findall(r"\?(\d+)", written)]
    params: dict[str, None] | tuple[None, ...] = (
        dict.fromkeys(names) if names
        else (None,) * (max(numbered) if numbered else written.count("?")))
    conn = q.backend.db.conn

    def program(sql: str) -> list[tuple[object, ...]]:
        return [row[1:7] for row in conn.execute("EXPLAIN " + sql, params) if row[1] != "Init"]

    assert program(run) == program(written)


def test_a_fragment_is_written_where_a_statement_includes_it(tmp_path: Path) -> None:
    """A block named ``_...`` is no statement: its text goes where a statement says
    ``-- include:`` (before comments are dropped); an include of no block is an error."""
    path = tmp_path / "queries.sql"
    path.write_text("-- name: _f\n-- why f\nWITH f AS (SELECT 1 AS x)\n\n"
                    "-- name: one\n-- include: _f\nSELECT x FROM f;\n\n"
                    "-- name: two\n-- include: _f\n, g AS (SELECT 2)\nSELECT x FROM f, g;\n")
    assert load_queries(path) == {"one": "WITH f AS (SELECT 1 AS x)\nSELECT x FROM f;",
                                  "two": "WITH f AS (SELECT 1 AS x)\n, g AS (SELECT 2)\n"
                                         "SELECT x FROM f, g;"}
    assert load_queries(path, comments=True)["one"].startswith("-- why f\nWITH f")
    path.write_text("-- name: one\n-- include: _g\nSELECT 1;\n")
    with pytest.raises(ValueError, match="include: _g"):
        load_queries(path)


def test_compact_keeps_quoted_text() -> None:
    sql = """SELECT 'a  --  b', "odd  name" -- a comment, 'quoted'
               FROM t  WHERE x = 'it''s'  AND y <= - -1 -- the end"""
    assert compact(sql) == """SELECT 'a  --  b',"odd  name" FROM t WHERE x='it''s' AND y <=- -1"""


_SET_END = frozenset(("WHERE", "RETURNING", "FROM"))


def _jobs_set_list(sql: str) -> dict[str, str] | None:
    """What an UPDATE of sqlq_jobs sets: {column: its expression}; None for a statement
    that updates no job."""
    found = re.search(r"\bUPDATE (?:OR IGNORE )?sqlq_jobs\s+SET\s", sql)
    if found is None:
        return None
    depth, parts, part = 0, [], ""
    for token in re.findall(r"'[^']*'|\w+|[(),]|[^\w\s(),']+|\s+", sql[found.end():]):
        if depth == 0 and token.upper() in _SET_END:
            break
        depth += (token == "(") - (token == ")")
        if token == "," and depth == 0:
            parts.append(part)
            part = ""
        else:
            part += token
    parts.append(part)
    return {column.strip(): value.strip()
            for column, _, value in (p.partition("=") for p in parts)}


def test_every_move_into_a_counted_state_fires_the_count_of_that_state() -> None:
    """sqlq_count_entered (migration 0010) fires only for an UPDATE that sets one of its
    columns, so that a claim (into state 2, not counted) does not run it for nothing.
    Each statement that moves jobs into another state must therefore set one, or the
    kept counts drift silently; and the claims the engine runs set none."""
    schema = (Path(__file__).resolve().parents[2] / "migrations" / "sqlite"
              / "schema.sql").read_text()
    match = re.search(r"CREATE TRIGGER sqlq_count_entered\s+AFTER UPDATE OF ([\w, ]+?) ON",
                      schema)
    assert match is not None
    fires = {c.strip() for c in match.group(1).split(",")}
    assert "state" not in fires
    moves, claims = [], []
    for name, sql in load_queries(Path(store.__file__).with_name("queries.sql")).items():
        columns = _jobs_set_list(sql)
        if re.search(r"\bUPDATE\s+(?:OR\s+\w+\s+)?sqlq_jobs\b", sql):
            assert columns is not None, f"{name}: an UPDATE of sqlq_jobs this test cannot read"
        if columns is None or "state" not in columns:
            continue
        if columns["state"] == "2":
            claims.append(name)
            if name != "claim_job_by_id":  # beanstalkd's reserve-job: rare, and it sets
                # delay_until and timeouts (the trigger runs, its WHEN false)
                assert not fires & columns.keys(), (name, fires & columns.keys())
        else:
            moves.append(name)
            assert fires & columns.keys(), f"{name} moves jobs but sets none of {fires}"
    # the parse found them all (a parse that finds nothing would pass)
    assert {"release_job", "bury_job", "kick_buried", "kick_delayed", "kick_job",
            "promote_due", "postpone_job", "replace_job", "release_owner",
            "release_children"} <= set(moves), moves
    assert {"claim_picked_job", "claim_picked_range", "claim_job_in_tube",
            "claim_jobs"} <= set(claims), claims


#: PostgreSQL statements EXPLAIN cannot take (VACUUM) or that read catalogs, not jobs.
PG_NOT_PLANNED = {"vacuum_jobs", "table_health"}
_TEXT_PARAMS = {"tube", "topic", "unique_key", "reason", "owner", "name", "token", "text",
                "host", "place", "outcome", "error", "message", "traceback"}


def _pg_value(name: str) -> object:
    if name in ("tubes", "tokens"):
        return ["a", "b"]
    if name in ("body", "result", "bytes"):
        return b"x"
    if name == "bodies":
        return [b"x"]
    if name in ("ids", "leases", "priorities", "delays", "ttrs", "known", "parents",
                "children"):
        return [1, 2]
    if name in ("gone", "capped", "expired_check", "prove"):
        return False
    if name == "scan_tube":
        return ["a", "a", "a"]
    if name in ("scan_lo", "scan_hi", "scan_from", "scan_cand"):
        return [0, 1, 2]
    if name == "scan_xmax":
        return [None, None, None]
    if name == "grace":
        return 5.0
    return "x" if name in _TEXT_PARAMS else 1


@pytest.mark.parametrize("name", sorted(set(PostgresStore.Q) - PG_NOT_PLANNED))
def test_postgres_query_plan_uses_indexes(pg_url: str, name: str) -> None:
    """With sequential scans priced out, no statement scans the jobs table: each has an
    index to use (on a small table the planner would rightly scan anyway)."""
    sql = PostgresStore.Q[name]
    params: dict[str, object] | tuple[object, ...] = {
        p: _pg_value(p) for p in re.findall(r"%\((\w+)\)s", sql)}
    if not params and "%s" in sql:  # positional (delete_leased_job: ints)
        params = (1,) * sql.count("%s")
    if name == "import_job":  # a page of jobs: each column an array
        params = {p: [value] for p, value in params.items()}  # type: ignore[union-attr]
    with psycopg.connect(pg_url) as conn:
        conn.execute("SET enable_seqscan = off")
        plan = "\n".join(r[0] for r in conn.execute("EXPLAIN " + sql, params or None))
        conn.rollback()
    scans = re.findall(r"Seq Scan on sqlq_jobs\b", plan)
    if name not in MAY_SCAN | {"count_everything", "export_job"}:
        assert not scans, f"{name} scans the jobs table:\n{plan}"


def test_every_query_is_used_by_store() -> None:
    """Every named block of each backend's queries.sql is run by that backend's code
    (names built at run time: peek_<which>_id, export_/import_<kind>, list_<state>_jobs)."""
    from sqlq.backends import postgres, sqlite
    from sqlq.backends.postgres import horizon as pg_horizon
    from sqlq.backends.postgres import owners as pg_owners
    from sqlq.backends.sqlite import horizon as sqlite_horizon

    for queries, modules in ((SQLiteStore.Q, (sqlite, store, *SHARED, sqlite_horizon)),
                             (PostgresStore.Q, (postgres, postgres.store, *SHARED, pg_horizon,
                                                pg_owners))):
        source = ""
        for module in modules:
            with open(module.__file__ or "") as f:
                source += f.read()
        unused = [name for name in queries if f'"{name}"' not in source
                  and not re.fullmatch(r"(peek|export|import|list)_\w+", name)]
        assert not unused, f"queries.sql blocks nobody runs: {unused}"


def test_postgres_claim_functions_read_jobs_through_indexes(pg_url: str) -> None:
    """EXPLAIN shows a function as one Function Scan: the statements inside sqlq_claim
    and sqlq_delete_and_claim_many are checked by the table's scan counters instead,
    read within the transaction that ran them (with sequential scans priced out)."""
    with Queue(pg_url) as q:
        q.put_many([b"x"] * 30, tube="a")
        q.put_many([b"y"] * 30, tube="b", delay=1)
    with psycopg.connect(pg_url) as conn:
        conn.execute("SET enable_seqscan = off")
        rows = conn.execute(
            "SELECT id, lease FROM sqlq_claim(ARRAY['a', 'b'], 0, 'o', 10)").fetchall()
        assert len(rows) == 10
        claimed = conn.execute(
            "SELECT id FROM sqlq_delete_and_claim_many(%s::bigint[], %s::bigint[], 0,"
            " ARRAY['a', 'b'], 'o', 10)",
            ([r[0] for r in rows], [r[1] for r in rows])).fetchall()
        assert len(claimed) == 10
        scans = conn.execute(
            "SELECT pg_stat_get_xact_numscans('sqlq_jobs'::regclass)").fetchone()
        conn.rollback()
    assert scans is not None
    assert scans[0] == 0, f"{scans[0]} sequential scans of sqlq_jobs"


def test_postgres_claims_find_their_rows_by_id_on_a_long_queue(pg_url: str) -> None:
    """With the planner free to choose (statistics of a queue of thousands, the claim's
    generic plan), a claim reads no more of the table than its probes and the rows it
    takes: joining the pick to the table chose a hash join over a scan of every job."""
    with Queue(pg_url) as q:
        q.put_many([b"x"] * 3000, tube="a")
    with psycopg.connect(pg_url) as conn:
        conn.execute("ANALYZE sqlq_jobs")
        for n in (1, 10, 1, 10):
            conn.execute("SELECT id FROM sqlq_claim(ARRAY['a'], 0, 'o', %s)", (n,)).fetchall()
        scans = conn.execute(
            "SELECT pg_stat_get_xact_numscans('sqlq_jobs'::regclass)").fetchone()
        conn.rollback()
    assert scans is not None
    assert scans[0] == 0, f"{scans[0]} sequential scans of sqlq_jobs in 4 claims"


def _claims(conn: object, sql: str, params: dict[str, object] | tuple[object, ...]
            ) -> list[tuple[object, ...]]:
    """What one claim statement takes, claim after claim until it finds nothing, in a
    transaction rolled back afterwards (the next statement sees the same jobs)."""
    run = conn.execute  # type: ignore[attr-defined]
    run("BEGIN")
    taken = []
    try:
        while rows := run(sql, params).fetchall():
            taken.append(rows[0][:3])
    finally:
        run("ROLLBACK")
    return taken


@pytest.mark.sqlite_only
def test_the_one_tube_claim_takes_the_jobs_the_general_claim_takes(fq: Queue, clock: object
                                                                   ) -> None:
    """claim_job_in_tube (the reserve of one tube) and claim_job give the same jobs in the
    same order: priority, then id; other tubes, delayed, buried and reserved jobs left
    alone; a paused tube gives nothing, a pause that ended gives back its jobs."""
    fq.put(b"held", tube="a", priority=0)
    held = fq.reserve("a", timeout=0)
    assert held is not None and held.body == b"held"
    fq.put(b"parked", tube="a", priority=0)
    parked = fq.reserve("a", timeout=0)
    assert parked is not None and parked.body == b"parked"
    parked.bury()
    for i, priority in enumerate([5, 1, 5, 0, 2**32 - 1, 1, 5, 3]):
        fq.put(f"a{i}", tube="a", priority=priority)
        fq.put(f"b{i}", tube="b", priority=priority)
    fq.put(b"later", tube="a", priority=0, delay=60)
    fq.pause_tube("b", 30)
    conn = fq.backend.db.conn  # type: ignore[attr-defined]
    now = clock.now  # type: ignore[attr-defined]
    for tube in ("a", "b", "empty"):
        general = _claims(conn, SQLiteStore.Q["claim_job"],
                          {"tubes": f'["{tube}"]', "now": now, "owner": "o", "capped": 0,
                           "lease": 7})
        one_tube = _claims(conn, SQLiteStore.Q["claim_job_in_tube"], (now, "o", tube, 7))
        assert one_tube == general
        if tube == "a":
            assert [row[2] for row in one_tube] == sorted(row[2] for row in one_tube)
            assert len(one_tube) == 8
        else:
            assert one_tube == []
    later = now + 31_000  # the pause is over
    assert (_claims(conn, SQLiteStore.Q["claim_job_in_tube"], (later, "o", "b", 7))
            == _claims(conn, SQLiteStore.Q["claim_job"], {"tubes": '["b"]', "now": later,
                                                          "owner": "o", "capped": 0,
                                                          "lease": 7}))


def _claimed_until_empty(conn: Any, state: str, claim: Callable[..., Any], *args: Any
                         ) -> tuple[list[Any], list[Any]]:
    """Run ``claim(conn, *args)`` in one write transaction, rolled back after, until it
    claims nothing: what each claim returned, and the jobs' table (``state``) as it left
    it."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        got = []
        while found := claim(conn, *args):
            got.append(found)
        return got, conn.execute(state).fetchall()
    finally:
        conn.execute("ROLLBACK")


def _one_by_returning(conn: Any, args: tuple[Any, ...]) -> Any:
    rows = conn.execute(SQLiteStore.Q["claim_job_in_tube"], args).fetchall()
    return rows[0] if rows else None


def _one_by_pick(conn: Any, args: tuple[Any, ...]) -> Any:
    rows = conn.execute(SQLiteStore.Q["pick_job_in_tube"], args).fetchall()
    if rows:
        now, owner, _, lease = args
        conn.execute(SQLiteStore.Q["claim_picked_job"], (now, owner, rows[0][0], lease))
    return rows[0] if rows else None


def _batch_by_returning(conn: Any, now: int, tube: str) -> list[Any]:
    rows = conn.execute(SQLiteStore.Q["claim_jobs_in_tube"], (now, "o", tube, 3)).fetchall()
    return sorted(rows, key=lambda r: (r[2], r[0]))


def _batch_by_pick(conn: Any, now: int, tube: str) -> list[Any]:
    """pick_jobs_in_tube, then the range claim (one priority) or the claim by ids, with
    leases base (1000) + id, checked in the table."""
    rows = conn.execute(SQLiteStore.Q["pick_jobs_in_tube"], (now, "o", tube, 1000, 3)
                        ).fetchall()
    if not rows:
        return rows
    if rows[0][2] == rows[-1][2]:
        conn.execute(SQLiteStore.Q["claim_picked_range"],
                     (now, "o", tube, 1000, rows[0][2], rows[0][0], rows[-1][0]))
    else:
        conn.execute(SQLiteStore.Q["claim_picked_jobs"],
                     (now, "o", json.dumps([r[0] for r in rows]), 1000))
    assert conn.changes() == len(rows)
    lease = ClaimRow._fields.index("lease")
    assert all(r[lease] == 1000 + r[0] for r in rows)
    assert conn.execute(f"SELECT count(*) FROM sqlq_jobs WHERE lease = 1000 + id "
                        f"AND id IN ({','.join(str(r[0]) for r in rows)})"
                        ).fetchall()[0][0] == len(rows)
    return rows


def _fill_a_and_paused_b(fq: Queue, priorities: list[int]) -> None:
    """Jobs of these priorities in tube "a" (TTRs of their own) and in tube "b" (paused
    for 30 s), and one delayed job in "a": what the one-tube claims are compared on."""
    for i, priority in enumerate(priorities):
        fq.put(f"a{i}", tube="a", priority=priority, ttr=10 + i)
        fq.put(f"b{i}", tube="b", priority=priority)
    fq.put(b"later", tube="a", priority=0, delay=60)
    fq.pause_tube("b", 30)


@pytest.mark.sqlite_only
def test_the_claim_by_a_read_and_an_update_is_the_one_tube_claim(fq: Queue, clock: object
                                                                 ) -> None:
    """Under the write lock, pick_job_in_tube then claim_picked_job (a claim without
    RETURNING's table) take the jobs claim_job_in_tube takes, in the same order, return
    its rows column for column and leave every job as it leaves them."""
    fq.put(b"held", tube="a")
    assert fq.reserve("a", timeout=0) is not None
    _fill_a_and_paused_b(fq, [5, 1, 5, 0, 2**32 - 1, 1, 5, 3])
    conn = fq.backend.db.conn  # type: ignore[attr-defined]
    now = clock.now  # type: ignore[attr-defined]
    state = "SELECT * FROM sqlq_jobs ORDER BY id"
    for tube in ("a", "b", "empty"):
        args = (now, "o", tube, 7)
        returned, after_returning = _claimed_until_empty(conn, state, _one_by_returning, args)
        picked, after_picks = _claimed_until_empty(conn, state, _one_by_pick, args)
        assert picked == returned
        assert after_picks == after_returning
        assert len(picked) == (8 if tube == "a" else 0)


@pytest.mark.sqlite_only
def test_a_reserve_of_one_tube_runs_the_one_tube_claim(q: Queue) -> None:
    """Queue.reserve("t") goes through the one-tube claim (inside its BEGIN IMMEDIATE:
    pick_job_in_tube, then claim_picked_job), a reserve of several tubes through
    claim_job, and each takes the right job."""
    statements: list[str] = []
    conn = q.backend.db.conn  # type: ignore[attr-defined]

    def trace(cursor: object, sql: str, bindings: object) -> bool:
        statements.append(sql)
        return True

    q.put(b"x", tube="t")
    q.put(b"y", tube="u")
    conn.set_exec_trace(trace)
    try:
        one_job = q.reserve("t", timeout=0)
        both = q.reserve(["t", "u"], timeout=0)
    finally:
        conn.set_exec_trace(None)
    assert one_job is not None and one_job.body == b"x"
    assert both is not None and both.body == b"y"
    assert SQLiteStore.Q["pick_job_in_tube"] in statements
    assert SQLiteStore.Q["claim_picked_job"] in statements
    assert SQLiteStore.Q["claim_job"] in statements


def _batches(conn: object, sql: str, params: dict[str, object] | tuple[object, ...]
             ) -> list[list[tuple[object, ...]]]:
    """What a batch claim statement takes, batch after batch (each in claim order,
    priority then id: RETURNING has none), until it finds nothing, in a transaction
    rolled back afterwards."""
    run = conn.execute  # type: ignore[attr-defined]
    run("BEGIN")
    taken = []
    try:
        while rows := run(sql, params).fetchall():
            taken.append(sorted((row[:3] for row in rows), key=lambda r: (r[2], r[0])))
    finally:
        run("ROLLBACK")
    return taken


@pytest.mark.sqlite_only
def test_the_one_tube_batch_claim_takes_the_jobs_the_general_batch_claim_takes(
        fq: Queue, clock: object) -> None:
    """claim_jobs_in_tube (reserve_many of one tube) and claim_jobs take the same jobs in
    the same batches: the n best by priority, then id; other tubes, delayed, buried and
    reserved jobs left alone; a paused or limited tube gives nothing."""
    fq.put(b"held", tube="a", priority=0)
    assert fq.reserve("a", timeout=0) is not None
    fq.put(b"parked", tube="a", priority=0)
    parked = fq.reserve("a", timeout=0)
    assert parked is not None
    parked.bury()
    for i, priority in enumerate([5, 1, 5, 0, 2**32 - 1, 1, 5, 3, 1, 0, 7]):
        for tube in "abc":
            fq.put(f"{tube}{i}", tube=tube, priority=priority)
    fq.put(b"later", tube="a", priority=0, delay=60)
    fq.pause_tube("b", 30)
    fq.limit("c", concurrency=5)
    conn = fq.backend.db.conn  # type: ignore[attr-defined]
    now = clock.now  # type: ignore[attr-defined]
    for tube in ("a", "b", "c", "empty"):
        general = _batches(conn, SQLiteStore.Q["claim_jobs"],
                           {"tubes": f'["{tube}"]', "now": now, "owner": "o", "n": 3})
        one_tube = _batches(conn, SQLiteStore.Q["claim_jobs_in_tube"], (now, "o", tube, 3))
        assert one_tube == general
        if tube == "a":
            assert [len(batch) for batch in one_tube] == [3, 3, 3, 2]
            keys = [(row[2], row[0]) for batch in one_tube for row in batch]
            assert keys == sorted(keys)
        else:
            assert one_tube == []
    later = now + 31_000  # the pause is over
    assert (_batches(conn, SQLiteStore.Q["claim_jobs_in_tube"], (later, "o", "b", 4))
            == _batches(conn, SQLiteStore.Q["claim_jobs"],
                        {"tubes": '["b"]', "now": later, "owner": "o", "n": 4}) != [])


@pytest.mark.sqlite_only
@pytest.mark.parametrize("priorities", [[5, 1, 5, 0, 2**32 - 1, 1, 5, 3, 1, 0, 7], [4] * 11],
                         ids=["mixed", "one-priority"])
def test_the_batch_claim_by_a_read_and_an_update_is_the_one_tube_batch_claim(
        fq: Queue, clock: object, priorities: list[int]) -> None:
    """Under the write lock, pick_jobs_in_tube then claim_picked_range (the picked jobs
    share a priority) or claim_picked_jobs (they do not) take the jobs
    claim_jobs_in_tube takes, batch after batch, return its rows column for column (a
    lease aside: base + id, not random()) and leave every job as it leaves them."""
    fq.put(b"held", tube="a", priority=4)
    assert fq.reserve("a", timeout=0) is not None
    _fill_a_and_paused_b(fq, priorities)
    conn = fq.backend.db.conn  # type: ignore[attr-defined]
    now = clock.now  # type: ignore[attr-defined]
    lease = ClaimRow._fields.index("lease")
    state = ("SELECT id, tube, priority, state, reserved_until, reserves, owner, "
             "lease IS NOT NULL FROM sqlq_jobs ORDER BY id")
    ranges = 0
    for tube in ("a", "b", "empty"):
        returned, after_returning = _claimed_until_empty(conn, state, _batch_by_returning,
                                                         now, tube)
        picked, after_picks = _claimed_until_empty(conn, state, _batch_by_pick, now, tube)
        ranges += sum(batch[0][2] == batch[-1][2] for batch in picked)
        assert [[r[:lease] + r[lease + 1:] for r in batch] for batch in picked] \
            == [[r[:lease] + r[lease + 1:] for r in batch] for batch in returned]
        assert after_picks == after_returning
        assert [len(batch) for batch in picked] == ([3, 3, 3, 2] if tube == "a" else [])
    assert ranges >= (4 if priorities[0] == priorities[1] else 1)


@pytest.mark.sqlite_only
def test_a_reserve_many_of_one_tube_runs_the_one_tube_batch_claim(q: Queue) -> None:
    """Queue.reserve_many(n, "t") goes through the one-tube batch claim (inside its BEGIN
    IMMEDIATE: pick_jobs_in_tube, then claim_picked_jobs for jobs of several priorities,
    claim_picked_range for one), of several tubes through claim_jobs, and each returns
    its jobs in claim order."""
    statements: list[str] = []
    conn = q.backend.db.conn  # type: ignore[attr-defined]

    def trace(cursor: object, sql: str, bindings: object) -> bool:
        statements.append(sql)
        return True

    for priority in (3, 1, 2, 1):
        q.put(f"t{priority}", tube="t", priority=priority)
    q.put(b"u", tube="u", priority=0)
    conn.set_exec_trace(trace)
    try:
        one_tube = q.reserve_many(3, "t", timeout=0)
        both = q.reserve_many(3, ["t", "u"], timeout=0)
    finally:
        conn.set_exec_trace(None)
    assert [(job.priority, job.id) for job in one_tube] == [(1, 2), (1, 4), (2, 3)]
    assert [job.body for job in both] == [b"u", b"t3"]
    assert SQLiteStore.Q["pick_jobs_in_tube"] in statements
    assert SQLiteStore.Q["claim_picked_jobs"] in statements
    assert SQLiteStore.Q["claim_jobs"] in statements
    q.put_many([b"v"] * 3, tube="v", priority=9)
    statements.clear()
    conn.set_exec_trace(trace)
    try:
        same = q.reserve_many(5, "v", timeout=0)
    finally:
        conn.set_exec_trace(None)
    assert [job.body for job in same] == [b"v"] * 3
    assert len({job.lease for job in same}) == 3
    assert SQLiteStore.Q["claim_picked_range"] in statements


#: Statements that bind a tube, a time or a LIMIT where the planner would read it, run
#: by reserve of one tube, peek, kick, stats, the dashboard's lists and sqlq copy. Left
#: out (they still re-prepare once the file has sqlite_stat4): promote_due and
#: next_due (the claim and its wait), purge_results (complete), result_outcome and
#: topic_tubes.
NO_REPREPARE = ("claim_job_in_tube", "look_ready", "peek_ready_id", "peek_delayed_id",
                "peek_buried_id", "kick_buried", "kick_delayed", "tube_counts", "list_ready_jobs",
                "list_delayed_jobs", "list_reserved_jobs", "list_buried_jobs", "search_jobs",
                "export_job", "promote_due", "next_due", "purge_results", "claim_job",
                "claim_jobs_in_tube", "pick_job_in_tube", "pick_jobs_in_tube",
                "claim_picked_range")

#: The statements of NO_REPREPARE bound by number, from a tuple: their values in order.
POSITIONAL = {"claim_job_in_tube": ("now", "owner", "tube", "lease"),
              "pick_job_in_tube": ("now", "owner", "tube", "lease"),
              "claim_jobs_in_tube": ("now", "owner", "tube", "limit"),
              "pick_jobs_in_tube": ("now", "owner", "tube", "lease", "limit"),
              "claim_picked_range": ("now", "owner", "tube", "lease", "bound", "min_id",
                                     "after")}


@pytest.mark.sqlite_only
def test_statements_are_not_prepared_again_on_every_run_after_analyze(q: Queue) -> None:
    """Once the file has sqlite_stat4 (ANALYZE, PRAGMA optimize), SQLite prepares a
    statement again on every run if the planner looks at a bound value: (SELECT :tube)
    hides it. A preparation is seen as authorizer calls (the authorizer runs only while
    a statement is compiled), counted over runs of an already prepared statement."""
    for tube in ("a", "b"):
        q.put_many([b"x"] * 200, tube=tube)
        q.put_many([b"y"] * 50, tube=tube, delay=100)
    conn = q.backend.db.conn  # type: ignore[attr-defined]
    conn.execute("ANALYZE")
    assert conn.execute("SELECT count(*) FROM sqlite_stat4").fetchone()[0] > 0
    values = {"tube": "a", "tubes": '["a"]', "now": 1, "owner": "o", "bound": 0, "limit": 10,
              "key": 0, "after": 0, "min_id": 0, "bytes": b"x", "text": "x", "capped": 0,
              "lease": 7}
    compiled = 0

    def count(*_: object) -> int:
        nonlocal compiled
        compiled += 1
        return apsw.SQLITE_OK

    prepared_again: dict[str, int] = {}
    for name in NO_REPREPARE:
        sql = SQLiteStore.Q[name]
        params: dict[str, object] | tuple[object, ...] = {
            p: values[p] for p in re.findall(r":(\w+)", sql)}
        if name in POSITIONAL:
            params = tuple(values[p] for p in POSITIONAL[name])
        conn.execute("BEGIN")
        try:
            conn.execute(sql, params).fetchall()
            conn.set_authorizer(count)  # expires every statement: the next run compiles
            conn.execute(sql, params).fetchall()
            compiled = 0
            for _ in range(3):
                conn.execute(sql, params).fetchall()
            if compiled:
                prepared_again[name] = compiled
        finally:
            conn.set_authorizer(None)
            conn.execute("ROLLBACK")
    assert not prepared_again, f"prepared again on every run (authorizer calls): {prepared_again}"

@pytest.mark.sqlite_only
def test_a_plain_put_runs_the_ready_insert_and_writes_the_row_insert_job_would(q: Queue
                                                                                ) -> None:
    """A put ready now without a unique key runs insert_ready_job (its constants spare
    SQLite four bindings and two partial indexes); any other put runs insert_job. Both
    write the same row for the same options, with ids that keep counting up."""
    statements: list[str] = []
    conn = q.backend.db.conn  # type: ignore[attr-defined]

    def trace(cursor: object, sql: str, bindings: object) -> bool:
        statements.append(sql)
        return True

    conn.set_exec_trace(trace)
    try:
        plain = q.put(b"plain", tube="t", priority=7, ttr=30)
        keyed = q.put(b"keyed", tube="t", priority=7, ttr=30, unique_key="k")
        delayed = q.put(b"delayed", tube="t", priority=7, ttr=30, delay=60)
    finally:
        conn.set_exec_trace(None)
    assert statements.count(SQLiteStore.Q["insert_ready_job"]) == 1
    assert statements.count(SQLiteStore.Q["insert_job"]) == 2
    assert [plain, keyed, delayed] == [1, 2, 3]
    rows = {job_id: conn.execute(
        "SELECT tube, priority, state, delay, delay_until, ttr, body, unique_key, created_at"
        " FROM sqlq_jobs WHERE id = ?", (job_id,)).fetchall()[0] for job_id in (1, 2, 3)}
    assert rows[plain][:8] == ("t", 7, 0, 0, None, 30_000, b"plain", None)
    assert 0 <= rows[keyed][8] - rows[plain][8] < 60_000  # created_at: the put's clock
    assert rows[keyed][:8] == ("t", 7, 0, 0, None, 30_000, b"keyed", "k")
    assert rows[delayed][2:4] == (1, 60_000)
