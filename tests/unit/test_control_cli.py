"""``sqlq cancel``, ``sqlq progress`` and the progress line of ``sqlq peek`` (issue 25), in
process through click's runner, on both backends."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner, Result

import sqlq
from sqlq.cli import cli


def run(db: str, *args: str, code: int = 0) -> Result:
    result = CliRunner().invoke(cli, ["--db", db, *args])
    assert result.exit_code == code, (result.exit_code, result.output, result.exception)
    if code:
        assert "Traceback" not in result.stderr
        assert len(result.stderr.strip().splitlines()) == 1, result.stderr
    return result


def test_cancel_deletes_a_job_and_exits_3_for_one_not_live(q: sqlq.Queue, db_url: str) -> None:
    jid = q.put(b"x")
    assert run(db_url, "cancel", str(jid)).output == f"cancelled job {jid}\n"
    assert q.peek(jid) is None
    run(db_url, "cancel", str(jid), code=3)
    other = q.put(b"y")
    assert json.loads(run(db_url, "cancel", str(other), "--json").output) == \
        {"id": other, "cancelled": True}


def test_cancel_of_a_reserved_job_tells_its_holder(q: sqlq.Queue, db_url: str) -> None:
    jid = q.put(b"x")
    job = q.reserve(timeout=0)
    assert job is not None
    run(db_url, "cancel", str(jid))
    with pytest.raises(sqlq.JobCancelled):
        job.delete()


def test_progress_by_id_and_peek_shows_it(q: sqlq.Queue, db_url: str) -> None:
    jid = q.put(b"body")
    run(db_url, "progress", str(jid), "0.5", code=3)  # not reserved
    assert q.reserve(timeout=0) is not None
    assert "progress" not in run(db_url, "peek", str(jid)).output
    assert run(db_url, "progress", str(jid), "50%", "-m", "half way").output == \
        f"job {jid}: 50% half way\n"
    assert "progress: 50% half way" in run(db_url, "peek", str(jid)).output
    record = json.loads(run(db_url, "peek", str(jid), "--json").output)
    assert record["progress"] == 0.5 and record["progress_message"] == "half way"
    run(db_url, "progress", str(jid), "37")
    assert q.stats_job(jid)["progress"] == 37
    assert "progress: 37" in run(db_url, "peek", str(jid)).output
    for bad in ("2.5", "-1", "lots", "150%"):
        run(db_url, "progress", str(jid), bad, code=2)
    assert q.stats_job(jid)["progress"] == 37
