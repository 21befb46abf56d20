"""The attempt history below the worker, on both backends: what ``Queue.attempts`` and
``stats_job`` report, the one-transaction write with a release or a burial, the bounds,
and the rule that a job which never failed costs nothing (its delete leaves the
attempts table alone)."""

from __future__ import annotations

import json

import pytest

import sqlq
from sqlq.attempts import KEPT, MESSAGE_LIMIT, TRACEBACK_LIMIT, Attempt, cap, raised_at

pytestmark = pytest.mark.both_apis  # q: as a Queue, then as an AsyncQueue


def _attempt(job: sqlq.Job, outcome: str, traceback: str = "Traceback ...\nKeyError: 'a'"
             ) -> Attempt:
    return Attempt(job.id, job.reserves, 1_700_000_000_000, 0.25, "host-a", 4242, outcome,
                   "KeyError", "KeyError: 'a'", traceback)


def _rows(q: sqlq.Queue) -> int:
    with q.transaction() as tx:
        return int(tx.execute("SELECT count(*) FROM sqlq_attempts")[0][0])


def test_a_job_that_never_failed_has_no_attempts(q: sqlq.Queue) -> None:
    jid = q.put(b"x")
    assert q.attempts(jid) == []
    assert q.attempts(10**6) == [] and q.attempts(2**70) == []  # no such job: none
    stats = q.stats_job(jid)
    assert (stats["failures"], stats["last-error"], stats["last-traceback"]) == (0, "", "")
    with pytest.raises(TypeError, match="job_id"):
        q.attempts("1")  # type: ignore[arg-type]


def test_an_attempt_is_written_with_the_release_or_burial_and_read_back(db_url: str) -> None:
    with sqlq.Queue(db_url, durability="normal") as q:
        jid = q.put(b"x")
        job = q.reserve(timeout=0)
        assert job is not None
        q.engine.end_attempt(job, _attempt(job, "retried"), 0)
        assert job.state == "ready" and q.peek(jid).releases == 1  # type: ignore[union-attr]
        job = q.reserve(timeout=0)
        assert job is not None
        q.engine.end_attempt(job, _attempt(job, "buried", "Traceback ...\nKeyError: 'b'"), None)
        peeked = q.peek(jid)
        assert peeked is not None and peeked.state == "buried"
        assert peeked.bury_reason == "KeyError: 'a'" == job.bury_reason
        first, second = q.attempts(jid)
        assert first == Attempt(jid, 1, 1_700_000_000_000, 0.25, "host-a", 4242, "retried",
                                "KeyError", "KeyError: 'a'", "Traceback ...\nKeyError: 'a'")
        assert (second.attempt, second.outcome) == (2, "buried")
        stats = q.stats_job(jid)
        assert stats["failures"] == 2 and stats["last-traceback"].endswith("'b'")
        # A lost lease changes nothing: no release, no attempt.
        q.kick_job(jid)
        job = q.reserve(timeout=0)
        assert job is not None
        q.release(jid)  # an administrator took it back
        with pytest.raises(sqlq.JobLost):
            q.engine.end_attempt(job, _attempt(job, "retried"), 0)
        assert len(q.attempts(jid)) == 2 and q.stats_job(jid)["failures"] == 2
        # A lost run's failure is kept beside the job; a job gone keeps nothing.
        q.engine.keep_attempt(_attempt(job, "lost"))
        assert [a.outcome for a in q.attempts(jid)] == ["retried", "buried", "lost"]
        q.delete(jid)
        q.engine.keep_attempt(_attempt(job, "lost"))
        assert q.attempts(jid) == [] and _rows(q) == 0


def test_only_the_last_attempts_are_kept_each_bounded(db_url: str) -> None:
    with sqlq.Queue(db_url, durability="normal") as q:
        jid = q.put(b"x")
        for _ in range(KEPT + 3):
            job = q.reserve(timeout=0)
            assert job is not None
            long = Attempt(job.id, job.reserves, 1, 0.0, "h", None, "retried", "E" * 5000,
                           "m" * 5000, "t" * 50_000)
            q.engine.end_attempt(job, long, 0)
        kept = q.attempts(jid)
        assert [a.attempt for a in kept] == list(range(4, KEPT + 4))
        assert all(len(a.traceback) <= TRACEBACK_LIMIT and len(a.message) <= MESSAGE_LIMIT
                   and len(a.error) <= MESSAGE_LIMIT and a.pid is None for a in kept)
        assert q.stats_job(jid)["failures"] == KEPT + 3 and _rows(q) == KEPT


def test_the_delete_of_a_job_that_never_failed_leaves_the_attempts_table_alone(
        db_url: str) -> None:
    """The success path pays nothing: the trigger that deletes a job's attempts fires only
    for a job with failures. A row planted for a job that never failed survives that job's
    delete (no statement touched the table); a failed job's rows go with it."""
    with sqlq.Queue(db_url, durability="normal") as q:
        clean, failed = q.put(b"ok"), q.put(b"bad")
        with q.transaction() as tx:
            tx.execute("INSERT INTO sqlq_attempts (job_id, attempt, started_at, duration, host,"
                       f" outcome, error, message, traceback) VALUES ({clean}, 1, 0, 0, 'h',"
                       " 'planted', '', '', '')")
        job = q.reserve(timeout=0)
        assert job is not None and job.id == clean
        job = q.reserve(timeout=0, delete=job)  # the worker's one-commit success path
        assert job is not None and job.id == failed
        q.engine.end_attempt(job, _attempt(job, "buried"), None)
        assert q.peek(clean) is None and _rows(q) == 2
        q.delete(failed)
        assert [a.outcome for a in q.attempts(clean)] == ["planted"] and _rows(q) == 1


def test_cap_keeps_the_start_and_the_end() -> None:
    assert cap("short", 10) == "short"
    text = "Traceback (most recent call last):\n" + "x" * 20_000 + "\nKeyError: 'end'"
    capped = cap(text, TRACEBACK_LIMIT)
    assert len(capped) <= TRACEBACK_LIMIT
    assert capped.startswith("Traceback (most recent call last):")
    assert capped.endswith("KeyError: 'end'") and "characters left out" in capped


def _lookup(users: dict[str, str], user: str) -> str:
    return users[user]  # the line raised_at names


def _decode(text: str) -> object:
    return json.loads(text)  # raised inside the standard library: this line is named


def _raised(call: object, *args: object) -> BaseException:
    try:
        call(*args)  # type: ignore[operator]
    except Exception as exc:  # noqa: BLE001 - what the worker catches
        return exc
    raise AssertionError("it did not raise")


def test_raised_at_names_the_innermost_frame_of_the_projects_code() -> None:
    """Web check F-2: failures group by where they were raised (the project's frame, the
    path relative to its sys.path entry), not by their message."""
    here = "tests/unit/test_attempts.py"
    bob, carol = _raised(_lookup, {}, "bob"), _raised(_lookup, {}, "carol")
    line = _lookup.__code__.co_firstlineno + 1
    assert raised_at(bob) == raised_at(carol) == f"{here}:{line} in _lookup"
    # json's own frames are the standard library's: the call into it is the project's.
    line = _decode.__code__.co_firstlineno + 1
    assert raised_at(_raised(_decode, "{")) == f"{here}:{line} in _decode"
    assert raised_at(KeyError("never raised")) == ""
    # An Attempt keeps it, capped as a message is.
    kept = Attempt(1, 1, 0, 0.0, "h", 1, "buried", "KeyError", "m", "", None, "x" * 5000)
    assert len(kept.params()["location"]) <= MESSAGE_LIMIT
