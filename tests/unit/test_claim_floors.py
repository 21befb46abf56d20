"""PostgreSQL claims from per-band floors (backends/postgres/floors.py; sqlq_floors in
migrations/postgres/0001_initial.sql).

A floor lets a claim skip the rows a held snapshot keeps; it must never cost a job its
place: every path that makes a job ready under an old id, a put whose transaction
commits late, a claim that rolls back, a more urgent or less urgent band, and a
database whose ids went back are each shown here to be claimed in order. Each test
first checks that a floor really is above the job it is about (else it would prove
nothing).
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

import sqlq
from sqlq.backends.postgres import floors
from sqlq.backends.postgres import migrate as pg_migrate

pytestmark = pytest.mark.slow

MIGRATIONS = Path(pg_migrate.migrations_dir())
QUERIES = Path(sqlq.__file__).parent / "backends" / "postgres" / "queries.sql"


@pytest.fixture
def q(pg_url: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[sqlq.Queue]:
    """A queue whose floors move on every claim (no wait for a candidate to ripen)."""
    monkeypatch.setattr(floors, "RIPE_MS", 0)
    queue = sqlq.Queue(pg_url, durability="normal")
    yield queue
    queue.close()


def band(q: sqlq.Queue, tube: str = "default", priority: int = 1024) -> int:
    """The floor this process holds for (tube, priority)."""
    b = q._backend.store.claims.floors._bands.get((tube, priority))  # type: ignore[attr-defined]
    return 0 if b is None else int(b.floor)


def drain(q: sqlq.Queue, n: int) -> list[int]:
    ids = []
    for _ in range(n):
        job = q.reserve(timeout=0)
        assert job is not None
        ids.append(job.id)
        job.delete()
    return ids


def test_floors_follow_the_claims(q: sqlq.Queue) -> None:
    ids = q.put_many([b"x"] * 10)
    assert drain(q, 6) == ids[:6]
    assert ids[3] <= band(q) <= ids[5], "the floor is not following the claims"


def test_a_job_released_below_the_floor_is_next(q: sqlq.Queue) -> None:
    ids = q.put_many([b"x"] * 10)
    held = q.reserve(timeout=0)
    assert held is not None and held.id == ids[0]
    drain(q, 5)
    assert band(q) > held.id
    held.release()
    assert q.reserve(timeout=0).id == held.id  # type: ignore[union-attr]


def test_a_job_kicked_below_the_floor_is_next(q: sqlq.Queue) -> None:
    ids = q.put_many([b"x"] * 10)
    held = q.reserve(timeout=0)
    assert held is not None and held.id == ids[0]
    held.bury()
    drain(q, 5)
    assert band(q) > held.id
    q.kick_job(held.id)
    assert q.reserve(timeout=0).id == held.id  # type: ignore[union-attr]


def test_a_child_released_below_the_floor_is_next(q: sqlq.Queue) -> None:
    parent = q.put(b"parent")
    child = q.put(b"child", after=parent)
    q.put_many([b"x"] * 10)
    held = q.reserve(timeout=0)
    assert held is not None and held.id == parent
    drain(q, 5)
    assert band(q) > child
    held.delete()
    assert q.reserve(timeout=0).id == child  # type: ignore[union-attr]


def test_other_bands_keep_their_order(q: sqlq.Queue) -> None:
    q.put_many([b"x"] * 10)
    late = q.put(b"later", priority=5000)
    drain(q, 5)
    assert band(q) > 0
    urgent = q.put(b"urgent", priority=0)
    assert q.reserve(timeout=0).id == urgent  # type: ignore[union-attr]
    drain(q, 5)
    assert q.reserve(timeout=0).id == late  # type: ignore[union-attr]


def test_a_put_committed_late_holds_the_floor_below_it(q: sqlq.Queue, pg_url: str) -> None:
    """A put in the application's transaction took its id before jobs claimed since:
    while it is open no floor passes it, and once it commits it is the next job."""
    q.put_many([b"x"] * 3)
    drain(q, 2)
    with psycopg.connect(pg_url) as app:
        late = sqlq.put(app, b"late")
        q.put_many([b"x"] * 10)
        drain(q, 6)
        assert 0 < band(q) <= late, "a floor passed a put still in flight"
        app.commit()
    assert q.reserve(timeout=0).id == late  # type: ignore[union-attr]


def test_a_put_that_slips_below_the_floor_is_still_claimed(q: sqlq.Queue, pg_url: str,
                                                           monkeypatch: pytest.MonkeyPatch
                                                           ) -> None:
    """Past PATIENCE_MS a floor no longer waits for open transactions: a put held open
    that long is found by a claim that reads every band whole."""
    monkeypatch.setattr(floors, "PATIENCE_MS", 0)
    monkeypatch.setattr(floors, "EMPTY_RESCAN_S", 0.0)
    q.put_many([b"x"] * 3)
    drain(q, 2)
    with psycopg.connect(pg_url) as app:
        late = sqlq.put(app, b"late")
        rest = q.put_many([b"x"] * 10)
        drain(q, 6)
        assert band(q) > late
        app.commit()
    taken = drain(q, 6)
    assert sorted(taken) == sorted([late, *rest[5:]])  # the 6 drained: 3, then rest[:5]
    assert q.reserve(timeout=0) is None


def test_a_claim_rolled_back_leaves_no_job_below_the_floor(q: sqlq.Queue, pg_url: str) -> None:
    ids = q.put_many([b"x"] * 10)
    with psycopg.connect(pg_url) as other:
        taken = other.execute("SELECT id FROM sqlq_claim(ARRAY['default'], 0, 'other')"
                              ).fetchone()
        assert taken is not None and taken[0] == ids[0]
        drain(q, 5)
        assert band(q) <= ids[0], "a floor passed a job another claim may give back"
        other.rollback()
    assert q.reserve(timeout=0).id == ids[0]  # type: ignore[union-attr]


def test_ids_that_went_back_are_found(q: sqlq.Queue, pg_url: str,
                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """A database restored from an older copy under the same URL: its ids are below
    this process's floors, and a claim that finds nothing reads every band whole."""
    monkeypatch.setattr(floors, "EMPTY_RESCAN_S", 0.0)
    q.put_many([b"x"] * 20)
    drain(q, 20)
    assert band(q) > 10
    with psycopg.connect(pg_url, autocommit=True) as admin:
        admin.execute("SELECT setval('sqlq_jobs_id_seq', 1, false)")
    first = q.put(b"again")
    assert first < band(q)
    assert q.reserve(timeout=0).id == first  # type: ignore[union-attr]


def test_floors_keep_a_claim_cheap_under_a_held_snapshot(q: sqlq.Queue, pg_url: str) -> None:
    """The pages one claim reads, with and without the floors, after 3,000 jobs were
    drained while another session held a snapshot from before them."""
    with psycopg.connect(pg_url, autocommit=True) as holder:
        holder.execute("BEGIN ISOLATION LEVEL REPEATABLE READ")
        holder.execute("SELECT count(*) FROM sqlq_jobs").fetchone()
        for _ in range(3):
            q.put_many([b"x"] * 1000)
        for job in iter(lambda: q.reserve(timeout=0), None):
            job.delete()
        q.put(b"last")
        store = q._backend.store  # type: ignore[attr-defined]
        scan = store.claims.floors.scan(["default"], 0)
        with psycopg.connect(pg_url) as probe:
            with_floors = _pages(probe, {**scan.params, "scan_cand": [None] * len(
                scan.params["scan_cand"])})
            whole = _pages(probe, {**scan.params, "scan_from": [0] * len(
                scan.params["scan_from"]), "scan_cand": [None] * len(scan.params["scan_cand"])})
        holder.execute("ROLLBACK")
    # The pages the floors spare (the dead jobs' ~90), not a ratio: a loaded run read 18
    # pages more in both probes alike (52 and 144 against 34 and 126), which a ratio of 3
    # refused though the floors spared exactly as many.
    assert with_floors < 60 and whole - with_floors > 60, (with_floors, whole)


def _pages(conn: psycopg.Connection, params: dict[str, object]) -> int:
    """Shared buffers one claim reads (EXPLAIN ANALYZE, rolled back: nothing claimed)."""
    from sqlq.backends.postgres.store import Q

    params = {**params, "tubes": ["default"], "now": 0, "owner": "probe", "capped": False}
    conn.execute(Q["claim_job"], params).fetchall()  # plan the function's statements
    conn.rollback()
    plan = "\n".join(r[0] for r in conn.execute("EXPLAIN (ANALYZE, BUFFERS) " + Q["claim_job"],
                                                params))
    conn.rollback()
    return int(re.search(r"Function Scan on sqlq_claim.*?shared hit=(\d+)", plan, re.S)[1])  # type: ignore[index]


def test_every_way_back_to_ready_marks_the_job_again() -> None:
    """A statement that makes an existing job ready (state 0) under its old id sets
    `again`, or floors could hide it: checked in queries.sql and the functions of the
    newest migration that defines each."""
    statements = re.split(r"\n-- name: ", QUERIES.read_text())
    functions: dict[str, str] = {}
    for path in sorted(MIGRATIONS.glob("[0-9]*.sql")):
        for m in re.finditer(r"FUNCTION (\w+)\(.*?\$body\$(.*?)\$body\$", path.read_text(), re.S):
            functions[m.group(1)] = m.group(2)
    bodies = statements + list(functions.values())
    making_ready = [b for b in bodies
                    if re.search(r"UPDATE sqlq_jobs\b[^;]*?(SET|,)\s*state = (0\b|CASE)", b)]
    assert len(making_ready) >= 8
    missing = [b.splitlines()[0] for b in making_ready if "again = true" not in b]
    assert not missing, f"made ready without `again`: {missing}"


def test_a_tube_keeps_floors_for_its_most_recent_bands(q: sqlq.Queue) -> None:
    """Each band with a floor is one more probe a claim: a tube keeps MAX_BANDS, those
    claimed from most recently, and still gives every job in order."""
    priorities = list(range(floors.MAX_BANDS + 4))
    ids = [q.put(b"x", priority=p) for p in priorities for _ in range(2)]
    assert drain(q, len(ids)) == ids
    kept = [p for t, p in q._backend.store.claims.floors._bands if t == "default"]  # type: ignore[attr-defined]
    assert sorted(kept) == priorities[-floors.MAX_BANDS:]


def test_a_lease_that_expires_is_claimed(q: sqlq.Queue) -> None:
    """The expired-lease branch is looked for from a moving start: a job whose TTR
    passed under a live holder is claimed again, by a claimer whose floors are set."""
    q.put_many([b"x"] * 5)
    drain(q, 5)
    assert band(q) > 0
    held_id = q.put(b"y", ttr=1)
    held = q.reserve(timeout=0)
    assert held is not None and held.id == held_id
    again = q.reserve(timeout=10)
    assert again is not None and again.id == held_id
    assert q.stats_job(held_id)["timeouts"] == 1


def test_the_fast_path_that_finds_nothing_after_its_delete(q: sqlq.Queue,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """The worker's delete-and-claim, when nothing is left above the floors, reads every
    band whole with a claim alone (its delete is done): nothing there is no job."""
    monkeypatch.setattr(floors, "EMPTY_RESCAN_S", 0.0)
    q.put_many([b"x"] * 3)
    job = q.reserve(timeout=0)
    for _ in range(2):
        job = q.reserve(timeout=0, delete=job)
        assert job is not None
    assert q.reserve(timeout=0, delete=job) is None
    assert q.stats()["current-jobs-ready"] == 0 and q.stats()["current-jobs-reserved"] == 0


def test_many_children_released_at_once_cost_a_claim_nothing(q: sqlq.Queue,
                                                             pg_url: str) -> None:
    """2,000 children made ready at once by their parent's delete are marked `again`,
    above the floor: a claim reads a few pages, not every one of them, and takes them
    in order, each once."""
    q.put_many([b"x"] * 5)
    drain(q, 5)
    parent = q.put(b"parent")
    children = q.put_many([b"child"] * 2000, after=parent)
    taken = q.reserve(timeout=0)
    assert taken is not None and taken.id == parent
    assert band(q) < children[0]
    taken.delete()
    scan = q._backend.store.claims.floors.scan(["default"], 0)  # type: ignore[attr-defined]
    with psycopg.connect(pg_url) as probe:
        pages = _pages(probe, {**scan.params, "scan_cand": [None] * len(
            scan.params["scan_cand"])})
    assert pages < 60, pages
    batch = q.reserve_many(50, timeout=0)
    assert [job.id for job in batch] == children[:50]
    assert drain(q, 10) == children[50:60]


@pytest.mark.pg_fresh  # ALTER DATABASE … SET track_functions
def test_a_claim_with_nothing_to_prove_does_not_call_sqlq_floors(
        pg_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """sqlq_floors runs only for a claim that has a ripe candidate or looks for expired
    leases (queries.sql claim_job): with neither due, every other claim of the worker's
    loop, the batch loop and the plain reserve answers without it, and takes its jobs
    in order all the same."""
    with psycopg.connect(pg_url, autocommit=True) as admin:
        dbname = admin.execute("SELECT current_database()").fetchone()[0]  # type: ignore[index]
        admin.execute(f'ALTER DATABASE "{dbname}" SET track_functions = \'pl\'')

    def calls() -> int:
        with psycopg.connect(pg_url, autocommit=True) as c:
            row = c.execute("SELECT coalesce(sum(calls), 0) FROM pg_stat_user_functions "
                            "WHERE funcname = 'sqlq_floors'").fetchone()
            return int(row[0])  # type: ignore[index]

    monkeypatch.setattr(floors, "RIPE_MS", 3_600_000)  # no candidate ripens in this test
    monkeypatch.setattr(floors, "EXPIRED_EVERY_MS", 3_600_000)
    with sqlq.Queue(pg_url, durability="normal") as q:
        ids = q.put_many([b"x"] * 90)
        taken = []
        job = q.reserve(timeout=0)  # the first claim looks for expired leases: one call
        assert job is not None
        taken.append(job.id)
        for _ in range(29):
            job = q.reserve(timeout=0, delete=job)
            assert job is not None
            taken.append(job.id)
        job.delete()
        for _ in range(3):
            batch = q.reserve_many(10, timeout=0)
            taken += [j.id for j in batch]
            q.delete_many(batch)
        taken += drain(q, 30)
        assert taken == ids
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and calls() == 0:
        time.sleep(0.2)
    assert 1 <= calls() <= 3, calls()  # the first claim's look, not one per claim (66)


def test_the_claim_statements_keep_their_generic_plans(q: sqlq.Queue) -> None:
    """Every claim statement stays on its generic plan once PostgreSQL has tried five
    custom ones: a statement whose generic plan is estimated dearer than its custom
    ones is planned anew at every call (delete_and_claim did, at 13% of a job's server
    CPU, while its f counted two rows)."""
    q.put_many([b"x"] * 80)
    job = q.reserve(timeout=0)
    for _ in range(12):  # delete_and_claim
        job = q.reserve(timeout=0, delete=job)
    job.delete()  # type: ignore[union-attr]
    batch = q.reserve_many(2, timeout=0)
    for _ in range(12):  # claim_jobs, then delete_and_claim_jobs
        q.delete_many(q.reserve_many(2, timeout=0))
        batch = q.reserve_many(2, timeout=0, delete=batch)
    q.delete_many(batch)
    drain(q, 12)  # claim_job
    conn = q._backend.db._usable()  # type: ignore[attr-defined]
    plans = conn.execute("SELECT statement, generic_plans, custom_plans "
                         "FROM pg_prepared_statements WHERE statement LIKE '%sqlq_floors%'"
                         ).fetchall()
    assert len(plans) >= 4, plans  # the four claim statements (one per set of types)
    for statement, generic, custom in plans:
        assert custom <= 5 and generic >= 1 or custom + generic <= 5, (statement[:200],
                                                                     generic, custom)
