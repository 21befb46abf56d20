"""The record of finished jobs through the faces other than the Queue (issue 39): ``sqlq
peek`` of a finished job (exit 3 as before, the message saying how it ended), ``sqlq
delete``/``cancel`` kept as by the CLI, and ``sqlq serve``'s delete, on both backends."""

from __future__ import annotations

import json
from typing import Any

import sqlq
from tests.integration.test_cli import db, run
from tests.servers import Raw

__all__ = ["db"]  # the fixture, used by name


def test_peek_of_a_finished_job_says_how_it_ended(db: Any) -> None:
    with sqlq.Queue(str(db)) as q:
        done = q.put(b"x")
        job = q.reserve(timeout=0)
        assert job is not None
        job.delete()
    result = run(db, "peek", str(done), code=3)
    assert f"job {done} not found: done " in result.stderr and "after 1 attempt" in result.stderr
    result = run(db, "peek", str(done), "--json", code=3)
    record = json.loads(result.stdout)["finished"]
    assert (record["id"], record["outcome"], record["attempts"], record["body"]) == (
        done, "done", 1, "x")
    run(db, "peek", "999", code=3)  # never put: as before
    assert "job 999 not found" in run(db, "peek", "999", code=3).stderr


def test_the_cli_says_it_deleted_or_cancelled(db: Any) -> None:
    with sqlq.Queue(str(db)) as q:
        deleted, cancelled = q.put(b"a"), q.put(b"b")
    run(db, "delete", str(deleted))
    run(db, "cancel", str(cancelled))
    assert "deleted" in run(db, "peek", str(deleted), code=3).stderr
    assert "cancelled" in run(db, "peek", str(cancelled), code=3).stderr
    with sqlq.Queue(str(db)) as q:
        for jid, outcome in ((deleted, "deleted"), (cancelled, "cancelled")):
            record = q.finished(jid)
            assert record is not None and (record.outcome, record.by) == (outcome, "cli")


def test_a_job_deleted_through_sqlq_serve_is_done(srv: Any) -> None:
    raw = Raw(srv.address)
    try:
        assert raw.cmd(b"put 0 0 60 5\r\nhello").startswith(b"INSERTED ")
        assert raw.cmd(b"reserve").startswith(b"RESERVED 1 5")
        assert raw.cmd(b"delete 1") == b"DELETED\r\n"
        assert raw.cmd(b"peek 1") == b"NOT_FOUND\r\n"  # beanstalkd's semantics stay
        assert raw.cmd(b"stats-job 1") == b"NOT_FOUND\r\n"
    finally:
        raw.close()
    record = srv.queue.finished(1)
    assert record is not None and (record.outcome, record.attempts, record.body) == (
        "done", 1, b"hello")
