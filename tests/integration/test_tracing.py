"""OpenTelemetry across processes, on both backends: a producer process puts under the
SDK (its in-memory exporter, tests/otel_spans.py), a ``sqlq work`` process runs the job
under the SDK too, and the worker's CONSUMER span is a child of the producer's PRODUCER
span (same trace id, the producer's span id as parent). Sync tasks, async tasks, and a
command worker run under ``opentelemetry-instrument`` with no code of ours; a retry's
span links the failed run before it; without opentelemetry-api nothing is imported."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import sqlq
from tests import otel_spans
from tests.conftest import spawn
from tests.workers import ROOT, Work

pytestmark = pytest.mark.timeout(90)

#: A producer under the SDK: argv url, how (queue, many, conn, async), task, its args.
PRODUCER = """
import asyncio, json, sys
import tests.otel_spans
import sqlq
from tests import traced_jobs

url, how, name = sys.argv[1], sys.argv[2], sys.argv[3]
args = json.loads(sys.argv[4])
body = getattr(traced_jobs, name).message(*args)
tube = "atraced" if name in ("aok", "nested") else "traced"
if how == "queue":
    with sqlq.Queue(url) as q:
        ids = [q.put(body, tube=tube)]
elif how == "many":
    with sqlq.Queue(url) as q:
        ids = q.put_many([body, body], tube=tube)
elif how == "async":
    async def main():
        async with sqlq.AsyncQueue(url) as aq:
            return [await aq.put(body, tube=tube)]
    ids = asyncio.run(main())
else:  # the application's own connection and transaction
    if "://" in url:
        import psycopg
        conn = psycopg.connect(url)
    else:
        import sqlite3
        conn = sqlite3.connect(url)
    ids = [sqlq.put(conn, body, tube=tube)]
    conn.commit()
    conn.close()
print(json.dumps(ids))
"""


def _produce(db_url: str, spans: Path, how: str, name: str, *args: Any) -> list[int]:
    env = {k: v for k, v in os.environ.items() if k != "SQLQ_DB"}  # tasks' Queue elsewhere
    proc = spawn(PRODUCER, db_url, how, name, json.dumps(args),
                 env=dict(env, SQLQ_TEST_SPANS=str(spans)))
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    ids: list[int] = json.loads(out)
    return ids


def _work(db_url: str, spans: Path, *args: str) -> None:
    with Work(db_url, "--import", "tests.otel_spans", "--import", "tests.traced_jobs",
              "--burst", *args, env={"SQLQ_TEST_SPANS": str(spans)}) as w:
        assert w.wait() == 0, w.text()


@pytest.fixture
def spans(db_url: str, tmp_path: Path) -> Path:
    """The directory the processes' spans go to; the database made (sqlq.put(conn)
    needs its schema)."""
    sqlq.Queue(db_url).close()
    directory = tmp_path / "spans"
    directory.mkdir()
    return directory


def _by_kind(spans: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [s for s in spans if s["kind"] == kind]


def _link(span: dict[str, Any]) -> dict[str, str]:
    return {"trace_id": span["trace_id"], "span_id": span["span_id"]}


def _assert_child(run: dict[str, Any], put: dict[str, Any]) -> None:
    """``run`` (a worker's span) is a child of ``put`` (a producer's, another process)."""
    assert run["pid"] != put["pid"]
    assert run["trace_id"] == put["trace_id"]
    assert run["parent_trace_id"] == put["trace_id"]
    assert run["parent_id"] == put["span_id"]


@pytest.mark.slow
@pytest.mark.parametrize("how", ["queue", "conn"])
def test_a_task_run_is_a_child_of_its_put_in_another_process(
        db_url: str, spans: Path, how: str) -> None:
    [done] = _produce(db_url, spans, how, "ok", 41)
    [quiet] = _produce(db_url, spans, how, "quiet")
    _work(db_url, spans)
    found = otel_spans.read(spans)
    puts = {s["attributes"]["messaging.message.id"]: s for s in _by_kind(found, "PRODUCER")}
    runs = {s["attributes"]["messaging.message.id"]: s for s in _by_kind(found, "CONSUMER")}
    assert set(puts) == set(runs) == {str(done), str(quiet)}
    for jid in (done, quiet):
        put, run = puts[str(jid)], runs[str(jid)]
        _assert_child(run, put)
        assert put["name"] == "send traced" and run["name"] == "process traced"
        assert put["attributes"]["messaging.system"] == "sqlq"
        assert put["attributes"]["messaging.operation.type"] == "send"
        assert put["attributes"]["messaging.destination.name"] == "traced"
        assert run["attributes"]["messaging.system"] == "sqlq"
        assert run["attributes"]["messaging.operation.type"] == "process"
        assert run["attributes"]["messaging.destination.name"] == "traced"
        assert run["attributes"]["messaging.sqlq.job.attempt"] == 1
        assert run["status"] == "UNSET"
        assert run["links"] == [_link(put)]  # the conventions' link to the creation context
    assert runs[str(done)]["attributes"]["messaging.sqlq.job.outcome"] == "completed"
    assert runs[str(quiet)]["attributes"]["messaging.sqlq.job.outcome"] == "deleted"


@pytest.mark.slow
def test_a_retry_links_the_failed_run_and_each_attempt_keeps_its_span(
        q: sqlq.Queue, db_url: str, spans: Path) -> None:
    [jid] = _produce(db_url, spans, "queue", "flaky")
    _work(db_url, spans)
    found = otel_spans.read(spans)
    [put] = _by_kind(found, "PRODUCER")
    first, second = sorted(_by_kind(found, "CONSUMER"),
                           key=lambda s: s["attributes"]["messaging.sqlq.job.attempt"])
    for run in (first, second):
        _assert_child(run, put)  # every run is in the put's trace, under the put's span
        assert run["status"] == "ERROR" and "exception" in run["events"]
    assert first["attributes"]["messaging.sqlq.job.attempt"] == 1
    assert first["attributes"]["messaging.sqlq.job.outcome"] == "released"
    assert first["links"] == [_link(put)]
    assert first["attributes"]["error.type"] == "RuntimeError"
    assert second["attributes"]["messaging.sqlq.job.attempt"] == 2
    assert second["attributes"]["messaging.sqlq.job.outcome"] == "buried"
    assert second["links"] == [_link(put), _link(first)]  # the run before it, too
    # Each kept attempt names its run's span (a tracing UI finds the run by it).
    kept = q.attempts(jid)
    assert [a.outcome for a in kept] == ["retried", "buried"]
    for attempt, run in zip(kept, (first, second), strict=True):
        assert attempt.trace is not None
        assert attempt.trace.startswith(f"00-{run['trace_id']}-{run['span_id']}-")


@pytest.mark.slow
def test_an_async_task_run_is_a_child_of_an_awaited_put(db_url: str, spans: Path) -> None:
    ids = _produce(db_url, spans, "async", "aok", 4)
    ids += _produce(db_url, spans, "many", "aok", 5)  # put_many: one span, two jobs
    _work(db_url, spans, "--concurrency", "2")
    found = otel_spans.read(spans)
    single, many = sorted(_by_kind(found, "PRODUCER"),
                          key=lambda s: s["attributes"]["messaging.operation.name"])
    assert single["attributes"]["messaging.operation.name"] == "put"
    assert many["attributes"]["messaging.operation.name"] == "put_many"
    assert many["attributes"]["messaging.batch.message_count"] == 2
    runs = {int(s["attributes"]["messaging.message.id"]): s for s in _by_kind(found, "CONSUMER")}
    assert sorted(runs) == ids
    _assert_child(runs[ids[0]], single)
    _assert_child(runs[ids[1]], many)
    _assert_child(runs[ids[2]], many)
    assert {r["attributes"]["messaging.sqlq.job.outcome"] for r in runs.values()} == \
        {"completed"}


@pytest.mark.slow
def test_a_plain_function_in_the_async_worker_runs_in_its_runs_span(
        db_url: str, spans: Path) -> None:
    [jid] = _produce(db_url, spans, "queue", "nested", 3)
    _work(db_url, spans, "--concurrency", "2")  # the event loop; a plain task in a thread
    found = otel_spans.read(spans)
    [put] = _by_kind(found, "PRODUCER")
    [run] = _by_kind(found, "CONSUMER")
    [inner] = [s for s in found if s["name"] == "nested work"]
    assert run["attributes"]["messaging.message.id"] == str(jid)
    _assert_child(run, put)
    assert (inner["trace_id"], inner["parent_id"]) == (run["trace_id"], run["span_id"])


def _console_spans(text: str) -> list[dict[str, Any]]:
    """The spans the SDK's console exporter printed (indented JSON objects) in ``text``."""
    decoder = json.JSONDecoder()
    found, at = [], 0
    while (at := text.find('{\n    "name"', at)) >= 0:
        span, end = decoder.raw_decode(text, at)
        found.append(span)
        at = end
    return found


@pytest.mark.slow
def test_a_command_worker_under_opentelemetry_instrument_is_traced_without_code(
        db_url: str, spans: Path, tmp_path: Path) -> None:
    [jid] = _produce(db_url, spans, "queue", "quiet")
    [put] = _by_kind(otel_spans.read(spans), "PRODUCER")
    seen = tmp_path / "traceparent"
    instrument = Path(sys.executable).with_name("opentelemetry-instrument")
    out = subprocess.run(
        [str(instrument), "--traces_exporter", "console", "--metrics_exporter", "none",
         "--logs_exporter", "none", sys.executable, "-m", "sqlq", "--db", db_url, "work",
         "--tube", "traced", "--burst", "--", "sh", "-c", f'echo "$TRACEPARENT" > {seen}'],
        env=dict(os.environ, PYTHONPATH=str(ROOT), OTEL_SERVICE_NAME="sqlq-worker"),
        cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    [run] = [s for s in _console_spans(out.stdout) if s["kind"] == "SpanKind.CONSUMER"]
    assert run["name"] == "process traced"
    assert run["attributes"]["messaging.message.id"] == str(jid)
    assert run["attributes"]["messaging.sqlq.job.outcome"] == "deleted"
    assert run["context"]["trace_id"] == f"0x{put['trace_id']}"
    assert run["parent_id"] == f"0x{put['span_id']}"
    # The command got the run's context in its environment (TRACEPARENT).
    assert seen.read_text().strip().startswith(
        f"00-{put['trace_id']}-{run['context']['span_id'][2:]}-")


def test_without_opentelemetry_nothing_is_imported_and_nothing_stored(db_url: str) -> None:
    code = """
    import sys
    sys.modules["opentelemetry"] = None  # as if opentelemetry-api were not installed
    import sqlq, sqlq.core.tracing
    with sqlq.Queue(sys.argv[1]) as q:
        q.put(b"a", tube="t")
        q.put_many([b"b"], tube="t")
        jobs = q.reserve_many(2, "t", timeout=0)
    assert not sqlq.core.tracing.INSTALLED
    assert [j.trace for j in jobs] == [None, None], jobs
    assert [m for m in sys.modules if m.startswith("opentelemetry.")] == []
    print("ok")
    """
    proc = spawn(code, db_url, cold=True)
    out, err = proc.communicate(timeout=60)
    assert (proc.returncode, out.strip()) == (0, "ok"), err


def test_with_the_api_but_no_provider_nothing_is_imported_and_nothing_stored(
        db_url: str) -> None:
    code = """
    import sys
    import sqlq, sqlq.core.tracing
    with sqlq.Queue(sys.argv[1]) as q:
        q.put(b"a", tube="t")
        q.put_many([b"b"], tube="t")
        jobs = q.reserve_many(2, "t", timeout=0)
    assert sqlq.core.tracing.INSTALLED and not sqlq.core.tracing.active()
    assert [j.trace for j in jobs] == [None, None], jobs
    assert "opentelemetry.trace" not in sys.modules  # nothing imported, nothing paid
    print("ok")
    """
    proc = spawn(code, db_url, cold=True)
    out, err = proc.communicate(timeout=60)
    assert (proc.returncode, out.strip()) == (0, "ok"), err


#: A publisher under the SDK: a topic with three subscribed tubes, one of which already
#: holds a live job with the publish's unique key (put under a span of its own).
PUBLISHER = """
import json, sys
import tests.otel_spans
from opentelemetry import trace
import sqlq
url = sys.argv[1]
with sqlq.Queue(url) as q:
    for tube in ("audit", "emails", "held"):
        q.subscribe("orders", tube)
    held = q.put(b"older", tube="held", unique_key="order-7")
    with trace.get_tracer("app").start_as_current_span("checkout"):
        ids = q.publish("orders", b'{"order": 7}', unique_key="order-7")
    traces = {job.tube: job.trace for job in q.reserve_many(3, ["audit", "emails", "held"],
                                                            timeout=0)}
print(json.dumps({"ids": ids, "held": held, "traces": traces}))
"""


def test_a_publish_is_one_producer_span_whose_trace_every_copy_carries(
        db_url: str, spans: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "SQLQ_DB"}
    proc = spawn(PUBLISHER, db_url, env=dict(env, SQLQ_TEST_SPANS=str(spans)))
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    got = json.loads(out)
    found = otel_spans.read(spans)
    [older, send] = _by_kind(found, "PRODUCER")
    [app] = [s for s in found if s["name"] == "checkout"]
    assert older["name"] == "send held" and send["name"] == "send orders"
    assert send["parent_id"] == app["span_id"]  # in the application's trace
    attributes = send["attributes"]
    assert attributes["messaging.operation.name"] == "publish"
    assert attributes["messaging.destination.name"] == "orders"
    assert attributes["messaging.batch.message_count"] == 3
    assert attributes["messaging.message.body.size"] == len(b'{"order": 7}')
    audit, emails, held = got["ids"]
    assert held == got["held"]  # the tube's live job with the key: no new copy
    def header(span: dict[str, Any]) -> str:  # its traceparent, less the flags
        return f"00-{span['trace_id']}-{span['span_id']}-"

    # Each copy the publish inserted carries its span; the older job keeps its own.
    traces = {tube: trace[:-2] for tube, trace in got["traces"].items()}
    assert traces == {"audit": header(send), "emails": header(send),
                      "held": header(older)}, got
