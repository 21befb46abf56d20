"""Failed attempts kept by real ``sqlq work`` processes, on both backends: the full
traceback of a task (file and line of the helper that raised), a command's stderr tail,
the bound on attempts per job and on a traceback's length, the rows going with their job,
and the traceback in ``sqlq peek`` and in the logs (text and JSON)."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

import sqlq
from sqlq.attempts import KEPT, MESSAGE_LIMIT, TRACEBACK_LIMIT
from sqlq.dashboard.views import group_key
from tests import failing_jobs, forkserver
from tests.dashboard_client import running
from tests.workers import ROOT, Work, wait_for

pytestmark = pytest.mark.timeout(90)

HELPER = str(Path(failing_jobs.__file__).resolve())
HELPER_LINE = f'File "{HELPER}", line {failing_jobs.LOOKUP_LINE}, in _lookup'


def _put(q: sqlq.Queue, task: object, *args: object) -> int:
    return q.put(task.message(*args), tube="attempts")  # type: ignore[attr-defined]


def _buried(q: sqlq.Queue, jid: int) -> bool:
    job = q.peek(jid)
    return job is not None and job.state == "buried"


def test_a_failing_task_keeps_each_attempts_traceback_with_the_helpers_file_and_line(
        q: sqlq.Queue, db_url: str) -> None:
    jid = _put(q, failing_jobs.price, {"qty": 1})
    with Work(db_url, "--import", "tests.failing_jobs", "--burst") as w:
        assert w.wait() == 0, w.text()
    assert _buried(q, jid)
    first, second = q.attempts(jid)
    assert (first.attempt, first.outcome) == (1, "retried")  # kept after the retry
    assert (second.attempt, second.outcome) == (2, "buried")  # and after the burial
    for a in (first, second):
        assert a.job_id == jid and a.error == "KeyError" and a.message == "KeyError: 'sku'"
        assert a.traceback.startswith("Traceback (most recent call last):")
        assert HELPER_LINE in a.traceback and a.traceback.endswith("KeyError: 'sku'")
        assert "sqlq/work" not in a.traceback  # the worker's own frame is left out
        # Where it was raised: the helper's line, relative to the sys.path entry.
        assert a.location == f"tests/failing_jobs.py:{failing_jobs.LOOKUP_LINE} in _lookup"
        assert a.pid is not None and a.pid != os.getpid() and a.host == os.uname().nodename
        assert a.duration >= 0 and a.started_at > 0
    assert first.started_at <= second.started_at
    # The bury reason stays the one-line summary; stats_job has the latest failure.
    assert q.peek(jid).bury_reason == "KeyError: 'sku'"  # type: ignore[union-attr]
    stats = q.stats_job(jid)
    assert (stats["failures"], stats["last-error"]) == (2, "KeyError: 'sku'")
    assert HELPER_LINE in stats["last-traceback"]
    # The text log carries the traceback block under each failure's line.
    log = w.text()
    assert log.count("Traceback (most recent call last):") == 2
    assert log.count(HELPER_LINE) == 2


def _rows(q: sqlq.Queue) -> int:
    """Every attempt row in the database, whatever its job."""
    with q.transaction() as tx:
        return int(tx.execute("SELECT count(*) FROM sqlq_attempts")[0][0])


def test_attempts_go_with_their_job(q: sqlq.Queue, db_url: str, tmp_path: Path) -> None:
    """A job that fails, then succeeds: its attempt is gone with it. A buried job deleted
    by hand: the same."""
    recovers = _put(q, failing_jobs.once, str(tmp_path / "marker"))
    buried = _put(q, failing_jobs.price, {"qty": 1})
    with Work(db_url, "--import", "tests.failing_jobs", "--burst") as w:
        assert w.wait() == 0, w.text()
    assert q.result(recovers, timeout=0) == b'"ok"'
    assert "retry in" in w.text() and f"job {recovers} tests.failing_jobs.once done" in w.text()
    assert q.attempts(recovers) == []
    assert len(q.attempts(buried)) == 2 and _rows(q) == 2
    q.delete(buried)
    assert q.attempts(buried) == [] and _rows(q) == 0


def test_attempts_per_job_and_traceback_length_are_bounded(q: sqlq.Queue, db_url: str) -> None:
    many = _put(q, failing_jobs.always, "n")
    loud = _put(q, failing_jobs.loud)
    with Work(db_url, "--import", "tests.failing_jobs", "--burst") as w:
        assert w.wait() == 0, w.text()
    assert _buried(q, many) and _buried(q, loud)
    kept = q.attempts(many)
    assert [a.attempt for a in kept] == list(range(14 - KEPT, 14))  # 13 runs, the last 10
    assert [a.outcome for a in kept] == ["retried"] * (KEPT - 1) + ["buried"]
    assert q.stats_job(many)["failures"] == 13  # every failure counted, trimmed ones too
    (big,) = q.attempts(loud)
    assert len(big.traceback) <= TRACEBACK_LIMIT and len(big.message) <= 1024
    assert big.traceback.startswith("Traceback (most recent call last):")
    assert "characters left out" in big.traceback and big.traceback.endswith(" END")
    # The bury reason is bounded as the message is (web check F-3): start, marker, end.
    reason = q.peek(loud).bury_reason  # type: ignore[union-attr]
    assert reason is not None and len(reason) <= MESSAGE_LIMIT
    assert reason.startswith("ValueError: xxx") and reason.endswith(" END")
    assert "characters left out" in reason


def test_one_line_failing_with_many_messages_is_one_group_retried_at_once(
        q: sqlq.Queue, db_url: str) -> None:
    """Web check F-2: KeyError 'bob', 'carol' and 'dave' raised by one line were three
    groups on the Failed page, each with its own Retry all. Now one group, with the three
    messages inside; its retry kicks all three. A command's failures, which have no
    traceback, still group by their reason."""
    users = ["bob", "carol", "dave", "carol"]
    ids = [q.put(failing_jobs.welcome.message(u), tube="welcome") for u in users]
    sh = [q.put(b"x", tube="sh") for _ in range(2)]
    with Work(db_url, "--import", "tests.failing_jobs", "--tube", "welcome", "--burst") as w:
        assert w.wait() == 0, w.text()
    with Work(db_url, "--tube", "sh", "--retries", "0", "--burst", "--", "sh", "-c",
              "echo 'no disk' >&2; exit 3") as w:
        assert w.wait() == 0, w.text()
    where = f"tests/failing_jobs.py:{failing_jobs.GREET_LINE} in _greet"
    command, task = q.failed_groups()
    assert (task.error, task.location, task.jobs, task.distinct) == ("KeyError", where, 4, 3)
    assert task.reason == "KeyError: 'carol'" and task.newest_id == ids[-1]
    assert task.messages == [("KeyError: 'carol'", 2), ("KeyError: 'dave'", 1),
                             ("KeyError: 'bob'", 1)]
    assert (command.error, command.location, command.reason, command.jobs) == (
        "exit status 3", "", "exit status 3: no disk", 2)
    assert [i for i, _ in q.failed_group_jobs(*task.key)] == ids
    assert [i for i, _ in q.failed_group_jobs(*command.key)] == sh
    with running(q) as client:
        page = client.get("/failed").text
        assert page.count('data-group="') == 2 and f"<code>{where}</code>" in page
        assert "(3 messages)" in page and "KeyError: &#39;bob&#39; <small>×1" in page
        job_page = client.get(f"/job?id={ids[0]}").text
        assert f'<small data-field="where">at <code>{where}</code></small>' in job_page
        done = client.post("/actions/group", {
            "csrf": client.csrf, "key": group_key(*task.key), "verb": "kick",
            "confirm": "yes", "next": "/failed"})
        assert done.status == 303 and "4+of+4+jobs+kicked" in done.headers["Location"]
    assert all(q.peek(i).state == "ready" for i in ids)  # type: ignore[union-attr]
    assert [g.key for g in q.failed_groups()] == [command.key]


def test_a_failed_command_keeps_its_stderr_tail(q: sqlq.Queue, db_url: str) -> None:
    jid = q.put(b"x", tube="sh")
    noise = "; ".join(f"echo 'noise {i:04d}' >&2" for i in range(400))  # ~ 6 KiB
    script = f"{noise}; echo 'step 2: disk full' >&2; echo 'at line 7' >&2; exit 3"
    with Work(db_url, "--tube", "sh", "--retries", "1", "--backoff", "0", "--burst",
              "--", "sh", "-c", script) as w:
        assert w.wait() == 0, w.text()
    assert _buried(q, jid)
    attempts = q.attempts(jid)
    assert [a.outcome for a in attempts] == ["retried", "buried"]
    for a in attempts:
        assert a.error == "exit status 3"
        assert a.message == "exit status 3: at line 7"
        assert a.traceback.endswith("step 2: disk full\nat line 7")
        assert "noise 0399" in a.traceback and len(a.traceback) <= TRACEBACK_LIMIT
    assert q.peek(jid).bury_reason == "exit status 3: at line 7"  # type: ignore[union-attr]


def test_a_command_killed_at_its_ttr_is_kept_as_timed_out(q: sqlq.Queue, db_url: str) -> None:
    jid = q.put(b"x", tube="sh", ttr=1)
    with Work(db_url, "--tube", "sh", "--retries", "0", "--burst",
              "--", "sh", "-c", "echo 'started the long part' >&2; sleep 30") as w:
        assert w.wait() == 0, w.text()
    (a,) = q.attempts(jid)
    assert (a.outcome, a.error) == ("buried", "timed out")
    assert a.message.startswith("killed: still running when its TTR")
    assert a.traceback == "started the long part"


def test_json_log_lines_of_failures_have_a_traceback_field(q: sqlq.Queue, db_url: str) -> None:
    jid = _put(q, failing_jobs.price, {"qty": 1})
    with Work(db_url, "--import", "tests.failing_jobs", "--burst", "--log-format",
              "json") as w:
        assert w.wait() == 0, w.text()
    failures = [r for r in w.records() if r.get("job") == jid and r.get("outcome")]
    assert [r["outcome"] for r in failures] == ["retry", "buried"]
    for record in failures:
        assert HELPER_LINE in record["traceback"]
        assert record["traceback"].endswith("KeyError: 'sku'")
        assert record["reason"] == "KeyError: 'sku'"


def test_peek_shows_the_attempts_and_the_latest_traceback(q: sqlq.Queue, db_url: str) -> None:
    jid = _put(q, failing_jobs.price, {"qty": 1})
    with Work(db_url, "--import", "tests.failing_jobs", "--burst") as w:
        assert w.wait() == 0, w.text()

    def peek(*args: str) -> str:
        done = forkserver.run([sys.executable, "-m", "sqlq", "--db", db_url, "peek", *args],
                              capture_output=True, text=True, cwd=ROOT, timeout=60)
        assert done.returncode == 0, done.stderr
        return done.stdout

    text = peek(str(jid))
    assert "attempts: 2 failed runs kept" in text
    assert "#1" in text and "retried" in text and "#2" in text and "buried" in text
    assert "traceback of attempt 2:" in text and HELPER_LINE in text
    assert f"(at tests/failing_jobs.py:{failing_jobs.LOOKUP_LINE} in _lookup)" in text
    record = json.loads(peek(str(jid), "--json"))
    assert record["attempts"][-1]["location"] == \
        f"tests/failing_jobs.py:{failing_jobs.LOOKUP_LINE} in _lookup"
    assert [a["outcome"] for a in record["attempts"]] == ["retried", "buried"]
    assert HELPER_LINE in record["attempts"][-1]["traceback"]
    assert record["bury_reason"] == "KeyError: 'sku'"
    assert "attempts" not in peek("--buried", "--tube", "attempts", "--raw")


def test_a_successful_run_writes_no_attempt(q: sqlq.Queue, db_url: str) -> None:
    jid = _put(q, failing_jobs.price, {"sku": 1})
    with Work(db_url, "--import", "tests.failing_jobs", "--burst") as w:
        assert w.wait() == 0, w.text()
    assert q.result(jid, timeout=0) == b"2"
    assert q.attempts(jid) == []
    assert wait_for(lambda: "done in" in w.text())
