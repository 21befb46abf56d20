"""Results: complete stores, result waits (across processes), JobBuried, Timeout, expiry."""

from __future__ import annotations

import json
import time

import pytest

import sqlq
from sqlq.backends.store import results as store
from tests.timing import FakeClock, soon

pytestmark = [pytest.mark.both_apis, pytest.mark.sqlite3_driver]


def _reserve(q: sqlq.Queue) -> sqlq.Job:
    job = q.reserve(timeout=0)
    assert job is not None
    return job


# -- in one process ----------------------------------------------------------------------------

def test_complete_then_read_the_result_many_times(q: sqlq.Queue) -> None:
    jid = q.put(b"in")
    _reserve(q).complete(b"out \x00\xff")
    assert q.peek(jid) is None  # the job is gone: complete deletes it
    for _ in range(3):
        assert q.result(jid) == b"out \x00\xff"
    assert q.result(jid, timeout=0) == b"out \x00\xff"


def test_result_of_str_and_empty_results(q: sqlq.Queue) -> None:
    a, b = q.put_many([b"a", b"b"])
    _reserve(q).complete("é")
    _reserve(q).complete()
    assert q.result(a) == "é".encode()
    assert q.result(b) == b""


def test_complete_by_id_needs_no_lease(q: sqlq.Queue) -> None:
    jid = q.put(b"x")
    q.complete(jid, b"admin")
    assert q.result(jid) == b"admin"


def test_result_of_an_id_never_issued_is_not_found(q: sqlq.Queue) -> None:
    q.put(b"x")
    with pytest.raises(sqlq.JobNotFound, match="never issued"):
        q.result(99, timeout=5)  # not waited for: it cannot come


def test_result_of_a_job_deleted_without_result_is_not_found(q: sqlq.Queue) -> None:
    jid = q.put(b"x")
    _reserve(q).delete()
    with pytest.raises(sqlq.JobNotFound, match="no result"):
        q.result(jid, timeout=5)


def test_buried_job_raises_job_buried_with_reason(q: sqlq.Queue) -> None:
    jid = q.put(b"x")
    _reserve(q).bury(reason="bad input: no address")
    with pytest.raises(sqlq.JobBuried) as info:
        q.result(jid, timeout=5)
    assert info.value.job_id == jid
    assert info.value.reason == "bad input: no address"
    assert "bad input" in str(info.value)
    q.kick_job(jid)  # kicked: pending again, so result waits for it
    with pytest.raises(sqlq.Timeout):
        q.result(jid, timeout=0)


def test_timeout_on_a_pending_job(q: sqlq.Queue) -> None:
    jid = q.put(b"x")
    with pytest.raises(sqlq.Timeout):
        q.result(jid, timeout=0)
    start = time.monotonic()
    with pytest.raises(sqlq.Timeout):
        q.result(jid, timeout=0.2)
    assert 0.19 <= time.monotonic() - start < soon(0.2)


def test_complete_with_a_lost_lease_changes_nothing(db_url: str, clock: FakeClock) -> None:
    with sqlq.Queue(db_url, durability="normal", clock=clock) as q:
        jid = q.put(b"x", ttr=1)
        job = _reserve(q)
        clock.advance(2)  # TTR over: the lease is gone
        with pytest.raises(sqlq.JobLost):
            job.complete(b"late")
        with pytest.raises(sqlq.Timeout):
            q.result(jid, timeout=0)
        assert q.peek(jid) is not None


def test_too_big_result_leaves_the_job_reserved(db_url: str) -> None:
    with sqlq.Queue(db_url, durability="normal", max_job_size=10) as q:
        jid = q.put(b"x")
        job = _reserve(q)
        with pytest.raises(sqlq.JobTooBig):
            job.complete(b"x" * 11)
        assert q.stats_job(jid)["state"] == "reserved"
        job.complete(b"x" * 10)
        assert q.result(jid) == b"x" * 10


@pytest.mark.face
def test_bad_arguments_name_themselves(q: sqlq.Queue) -> None:
    jid = q.put(b"x")
    with pytest.raises(TypeError, match="job_id"):
        q.result("1")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="job_id"):
        q.result(True)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="timeout"):
        q.result(jid, timeout=-1)
    with pytest.raises(TypeError, match="result"):
        q.complete(jid, 42)  # type: ignore[arg-type]


def test_results_expire_and_are_purged_by_later_completes(db_url: str,
                                                          clock: FakeClock) -> None:
    with sqlq.Queue(db_url, durability="normal", clock=clock, result_ttl=60) as q:
        first = q.put(b"1")
        _reserve(q).complete(b"one")
        clock.advance(59)
        assert q.result(first) == b"one"
        clock.advance(1)
        with pytest.raises(sqlq.JobNotFound, match="no result"):
            q.result(first)
        rows = q.backend.read(lambda c: c.execute("SELECT count(*) FROM sqlq_results").fetchall())
        assert rows[0][0] == 1  # expired but not purged yet: no reaper ran
        ids = q.put_many([b"x"] * (store.PURGE_BATCH + 5))
        for _ in ids:
            _reserve(q).complete(b"r")
        live = q.backend.read(lambda c: c.execute("SELECT count(*) FROM sqlq_results").fetchall())
        assert live[0][0] == len(ids)  # the expired one went, the fresh ones stay


def test_result_waits_for_a_commit_of_another_queue(db_url: str) -> None:
    with sqlq.Queue(db_url, durability="normal") as driver, \
            sqlq.Queue(db_url, durability="normal") as worker:
        jid = driver.put(b"x")
        job = _reserve(worker)
        import threading
        timer = threading.Timer(0.2, job.complete, (b"later",))
        timer.start()
        start = time.monotonic()
        assert driver.result(jid, timeout=5) == b"later"
        assert 0.15 < time.monotonic() - start < soon(0.2)
        timer.join()


# -- across processes --------------------------------------------------------------------------


# -- the command line --------------------------------------------------------------------------

def test_cli_result_exit_codes(db_url: str) -> None:
    from click.testing import CliRunner

    from sqlq.cli import cli

    def run(*args: str) -> tuple[int, str, str]:
        r = CliRunner().invoke(cli, ["--db", db_url, *args])
        return r.exit_code, r.stdout, r.stderr

    with sqlq.Queue(db_url, durability="normal") as q:
        done, buried, pending = q.put_many([b"a", b"b", b"c"])
        _reserve(q).complete(b'{"square": 49}')
        _reserve(q).bury(reason="no such user")
    assert run("result", str(done)) == (0, '{"square": 49}\n', "")
    assert run("result", str(done), "--raw")[1] == '{"square": 49}'
    code, out, _ = run("result", str(done), "--json")
    assert code == 0 and json.loads(out) == {"id": done, "result": '{"square": 49}',
                                             "result_encoding": "utf-8"}
    code, _, err = run("result", str(buried), "--timeout", "5s")
    assert code == 1 and "no such user" in err and len(err.strip().splitlines()) == 1
    assert run("result", str(pending), "--timeout", "0")[0] == 4
    assert run("result", str(pending), "--timeout", "50ms")[0] == 4
    assert run("result", "999", "--timeout", "5s")[0] == 3
