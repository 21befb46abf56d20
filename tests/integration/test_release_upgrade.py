"""Every released queue upgrades without losing or changing anything: each release's
fixture (tests/fixtures/<version>/, made by that release's own code with
tests/fixtures/make_release_fixture.py) is copied, opened by this code (its migrations
run) and read back as the release read it, then worked.

A migration that drops or alters a row, a column or a table's meaning fails here: the
reads are compared with the release's own, field by field, and the queue must still
hand out its jobs in order, give back a dead holder's reservation, release children when
their parents go and keep its counters. On PostgreSQL the release's ``pg_dump`` is
loaded into a new database in UTF8 and in SQL_ASCII (psql: a process, hence here)."""

from __future__ import annotations

import base64
import itertools
import json
import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import sqlq
from migrations.generate import frozen_records
from sqlq.backends.postgres.owners import GRACE_S

from ..conftest import ASCII_BACKEND
from ..fixtures.make_release_fixture import manifest, schema_rows
from ..pgserver import PgServer
from ..timing import FakeClock, soon

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
#: Every release that left a fixture (a folder named as its version, with a manifest).
VERSIONS = sorted(p.name for p in FIXTURES.iterdir() if (p / "manifest.json").is_file())
#: stats() keys that describe the reading process, not the queue.
PROCESS_KEYS = {"db", "pid", "uptime", "version", "hostname", "id", "os", "platform"}
_NAMES = itertools.count()


def test_the_fixtures_of_released_versions_are_here() -> None:
    """0.1.0 is the first release: its fixture must never go (a later release adds its own)."""
    assert "0.1.0" in VERSIONS
    for version in VERSIONS:
        folder = FIXTURES / version
        assert (folder / "queue.db").is_file() and (folder / "postgres.sql").is_file()


def _release(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in version.split("-")[0].split("."))


def test_each_fixture_was_made_by_the_migrations_its_release_froze() -> None:
    """A fixture made from a tree whose migrations changed before the release was cut
    would test an upgrade no user makes: each migration frozen in or before a fixture's
    release (migrations/frozen.txt) must be the one the fixture was made with."""
    frozen = frozen_records((FIXTURES.parent.parent / "migrations" / "frozen.txt").read_text())
    for version in VERSIONS:
        made_with = json.loads((FIXTURES / version / "manifest.json").read_text())["migrations"]
        stale = [path for release, path, digest in frozen
                 if path != "-" and _release(release) <= _release(version)
                 and made_with.get(path) != digest]
        assert not stale, (f"tests/fixtures/{version} was not made by the migrations {version} "
                           f"froze ({', '.join(stale)}): make it again with that release's code")


def _load(version: str, backend: str, tmp_path: Path, request: pytest.FixtureRequest
          ) -> Iterator[tuple[str, dict[str, Any]]]:
    """(url, manifest part) of a copy of one release's fixture, not yet opened by this code."""
    folder = FIXTURES / version
    expected = json.loads((folder / "manifest.json").read_text())
    if backend == "sqlite":
        path = tmp_path / "queue.db"
        shutil.copyfile(folder / "queue.db", path)
        os.chmod(path, 0o600)
        sidecar = tmp_path / "queue.db-sqlq"  # the owner files of its dead holders
        shutil.copytree(folder / "queue.db-sqlq", sidecar)
        os.chmod(sidecar, 0o700)
        yield str(path), expected["sqlite"]
        return
    server: PgServer = request.getfixturevalue("pg_server")
    name = f"release_{version.replace('.', '_')}_{os.getpid()}_{next(_NAMES)}"
    url = server.create_database(name, encoding="SQL_ASCII" if backend == ASCII_BACKEND
                                 else None)
    server.psql((folder / "postgres.sql").read_text(), database=name)
    try:
        yield url, expected["postgres"]
    finally:
        server.drop_database(name)


@pytest.fixture(params=[(v, b) for v in VERSIONS for b in ("sqlite", "postgres",
                                                           ASCII_BACKEND)],
                ids=lambda p: f"{p[0]}-{p[1]}")
def upgraded(request: pytest.FixtureRequest, tmp_path: Path
             ) -> Iterator[tuple[str, dict[str, Any]]]:
    version, backend = request.param
    yield from _load(version, backend, tmp_path, request)


@pytest.fixture(params=VERSIONS)
def upgraded_pg(request: pytest.FixtureRequest, tmp_path: Path
                ) -> Iterator[tuple[str, dict[str, Any]]]:
    yield from _load(request.param, "postgres", tmp_path, request)


def _same(found: Any, expected: Any, where: str) -> list[str]:
    """Where found differs from expected; keys found has beyond expected's are new
    fields of a later release, not differences."""
    if isinstance(expected, dict) and isinstance(found, dict):
        out = [f"{where}.{k}: gone" for k in expected if k not in found]
        for key in expected:
            if key in found:
                out += _same(found[key], expected[key], f"{where}.{key}")
        return out
    return [] if found == expected else [f"{where}: {found!r} != {expected!r} (the release's)"]


def test_every_job_and_all_queue_state_are_read_back_as_the_release_read_them(
        upgraded: tuple[str, dict[str, Any]]) -> None:
    url, expected = upgraded
    found = json.loads(json.dumps(manifest(url, expected["roles"])))  # tuples as lists
    stats = {k: v for k, v in expected["stats"].items() if k not in PROCESS_KEYS}
    expected = {**expected, "stats": stats}
    differences = [d for key in expected if key not in ("version", "format", "schema")
                   for d in _same(found[key], expected[key], key)]
    assert not differences, "\n".join(differences)
    assert set(found["jobs"]) == set(expected["jobs"]), "jobs gone or appeared"
    with sqlq.Queue(url) as q:  # the release's migrations still recorded, later ones after
        assert schema_rows(q)[:len(expected["schema"])] == expected["schema"]


def _state(q: sqlq.Queue, job_id: int) -> str | None:
    job = q.peek(job_id)
    return None if job is None else job.state


@pytest.mark.slow  # on PostgreSQL, anywhere but where the fixture was made: the grace, 5 s
def test_the_upgraded_queue_works(upgraded: tuple[str, dict[str, Any]]) -> None:
    url, expected = upgraded
    roles, jobs = expected["roles"], expected["jobs"]
    clock = FakeClock(expected["clock_ms"])
    with sqlq.Queue(url, clock=clock, durability="normal") as q:
        # Ready jobs come out by priority, then first-in first-out, tube by tube.
        for tube in ("emails", "reports", "flow", "traced", "audit"):
            ready = sorted((j for j in jobs.values() if j["tube"] == tube
                            and j["state"] == "ready"), key=lambda j: (j["priority"], j["id"]))
            claimed = q.reserve_many(len(ready) + 1, tubes=[tube], timeout=0)
            assert [j.id for j in claimed] == [j["id"] for j in ready], tube
            assert [j.body for j in claimed] == [base64.b64decode(j["body"]) for j in ready]
            q.delete_many([j for j in claimed if j.id not in roles["fan_in"]["parents"]
                           and j.id != roles["chain"][0]])
        # A unique key names its live (waiting) job; a deleted job's key is free again.
        assert q.put(b"again", tube="flow", unique_key="chain-3") == roles["chain"][2]
        assert q.put(b"again", tube="emails", unique_key="invoice-7") != roles["unique"]
        # Deleting parents releases their children: the fan-in after both, the chain link by link.
        first, second = roles["fan_in"]["parents"]
        q.delete(first)
        assert _state(q, roles["fan_in"]["child"]) == "waiting"
        q.delete(second)
        assert _state(q, roles["fan_in"]["child"]) == "ready"
        c1, c2, c3 = roles["chain"]
        q.delete(c1)
        assert _state(q, c2) == "ready"
        assert _state(q, c3) == "waiting"
        q.delete(c2)
        assert _state(q, c3) == "delayed"  # its delay counts from its release
        # A job ended since the upgrade leaves its record (migration 2); one the release
        # ended has none.
        record = q.finished(first)
        assert record is not None and record.outcome == "deleted" and record.tube == "flow"
        assert q.finished(roles["cancelled"]["id"]) is None
        # The dead holder's reservation comes back (on PostgreSQL at once on the machine
        # that made the fixture, after the grace elsewhere); the detached one lasts its TTR.
        held = q.reserve(tubes=["held"], timeout=soon(GRACE_S))
        assert held is not None and held.id == roles["held"] and held.reserves == 2
        assert q.stats_job(held.id)["progress"] == 0.25  # a retried run starts from it
        assert q.reserve(tubes=["detached"], timeout=0) is None
        # The cancelled job's holder is told so, under its old lease.
        with pytest.raises(sqlq.JobCancelled):
            q.delete(roles["cancelled"]["id"], lease=roles["cancelled"]["lease"])
        # Limits hold: two at once in `limited`; the paused tube gives nothing yet.
        assert len(q.reserve_many(5, tubes=["limited"], timeout=0)) == 2
        assert q.reserve(tubes=["paused"], timeout=0) is None
        # The kept results; a buried job kicked back to work, the other left buried; the
        # retried task's job run again, its failed attempt still kept.
        for job_id, result in expected["results"].items():
            assert q.result(int(job_id), timeout=0) == base64.b64decode(result)
        buried = sorted(int(i) for i, j in jobs.items() if j["state"] == "buried")
        assert q.kick(10, tube="broken") == 1
        assert [_state(q, i) for i in buried] == [
            "ready" if i == roles["buried"] else "buried" for i in buried]
        retried = q.reserve(tubes=["failing"], timeout=0)
        assert retried is not None and retried.id == roles["flaky"] and retried.reserves == 2
        assert [a.outcome for a in q.attempts(retried.id)] == ["retried"]
        # Ids are never reused: a new job gets one past every id the release issued.
        assert q.put(b"new") > expected["stats"]["total-jobs"]
        # Time moves on: the pause ends, the detached reservation times out, the delayed come.
        clock.advance(7 * 3600)
        unpaused = q.reserve(tubes=["paused"], timeout=0)
        assert unpaused is not None and unpaused.id == roles["paused"]
        detached = q.reserve(tubes=["detached"], timeout=0)
        assert detached is not None and detached.id == roles["detached"]
        assert q.stats_job(detached.id)["timeouts"] == 1
        late = q.reserve(tubes=["emails"], timeout=0)
        assert late is not None and late.id == roles["delayed"]


@pytest.mark.slow  # the grace, 5 s
def test_a_holder_that_died_on_another_machine_gives_its_job_back_after_the_grace(
        upgraded_pg: tuple[str, dict[str, Any]], pg_server: PgServer) -> None:
    """Where the fixture is opened is seldom where it was made: the holder's process
    cannot be looked up there, so its silence for the grace is what proves it dead."""
    url, expected = upgraded_pg
    # Its last heartbeat as of now: the fixture's is as old as the fixture, and a holder
    # silent for over an hour has its row forgotten (forget_silent_owners), then is judged
    # by its free lock alone. The grace counts from the first reaper's look at the server
    # (sqlq_server_epoch): this test's own, not the fixture's opening a while ago.
    pg_server.psql("UPDATE sqlq_owners SET host = 'elsewhere', place = 'another-boot pid:[1]', "
                   "seen_at = now(); DELETE FROM sqlq_server_epoch",
                   database=url.rsplit("/", 1)[1])
    with sqlq.Queue(url, clock=FakeClock(expected["clock_ms"])) as q:
        assert q.reserve(tubes=["held"], timeout=0) is None  # not yet: it may be alive
        held = q.reserve(tubes=["held"], timeout=soon(GRACE_S))
        assert held is not None and held.id == expected["roles"]["held"]
