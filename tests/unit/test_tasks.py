"""``@q.task``: the producer side (JSON calls, options, registry) and the retry policy.

In-process and fast; tests/integration/test_worker.py runs the same tasks in real workers.
"""

from __future__ import annotations

import datetime
import json
from typing import Any

import pytest
import tenacity

import sqlq
from sqlq.tasks.task import BIND_SHAPES, _loads, decode_call, encode_call
from sqlq.work import REGISTRY, RetryPolicy, TaskRunner, Worker


def test_a_task_still_runs_when_called(q: sqlq.Queue) -> None:
    @q.task()
    def add(a: int, b: int = 1) -> int:
        """Add."""
        return a + b

    assert add(2, b=3) == 5
    assert add.__doc__ == "Add." and add.__name__ == "add"
    assert q.stats()["total-jobs"] == 0


def test_put_enqueues_a_json_call_with_the_decorators_options(q: sqlq.Queue) -> None:
    @q.task(tube="emails", priority=10, ttr=90)
    def send(to: str, subject: str = "") -> None: ...

    jid = send.put("a@example.com", subject="hi")
    job = q.peek(jid)
    assert job is not None
    assert job.json() == {"task": f"{__name__}.test_put_enqueues_a_json_call_with_the_"
                                  "decorators_options.<locals>.send",
                          "args": ["a@example.com"], "kwargs": {"subject": "hi"}}
    assert (job.tube, job.priority, job.ttr, job.state) == ("emails", 10, 90, "ready")


def test_bare_decorator_and_name_override(q: sqlq.Queue) -> None:
    @q.task
    def plain() -> None: ...

    @q.task(name="billing.charge")
    def charge(cents: int) -> None: ...

    assert plain.name.endswith(".plain") and REGISTRY[plain.name] is plain
    assert REGISTRY["billing.charge"] is charge
    assert q.peek(charge.put(5)).json()["task"] == "billing.charge"  # type: ignore[union-attr]


def test_options_override_one_put(q: sqlq.Queue) -> None:
    @q.task(tube="t", priority=100)
    def job(n: int) -> None: ...

    first = job.options(delay=30, priority=1, ttr=5, unique_key="n-1").put(1)
    again = job.options(unique_key="n-1").put(2)
    assert first == again  # the live job with the key wins
    j = q.peek(first)
    assert j is not None and (j.state, j.priority, j.ttr) == ("delayed", 1, 5)
    other = q.peek(job.options(tube="elsewhere").put(3))
    assert other is not None and other.tube == "elsewhere" and other.priority == 100


def test_arguments_that_json_cannot_carry_are_named(q: sqlq.Queue) -> None:
    @q.task()
    def remind(who: str, when: Any, *, tags: Any = ()) -> None: ...

    with pytest.raises(TypeError, match=r"argument 'when' \(datetime"):
        remind.put("bob", datetime.datetime(2024, 1, 1))
    with pytest.raises(TypeError, match=r"argument 'tags' \(set"):
        remind.put("bob", 1, tags={1, 2})
    with pytest.raises(TypeError, match="argument 'when'"):
        remind.put("bob", float("nan"))  # not JSON either
    with pytest.raises(TypeError, match="missing a required argument"):
        remind.put("bob")
    assert q.stats()["total-jobs"] == 0


def test_codec_round_trip_and_bad_bodies() -> None:
    body = encode_call("m.f", [1, "x", [2]], {"k": {"a": None}})
    assert decode_call(body) == ("m.f", [1, "x", [2]], {"k": {"a": None}})
    assert decode_call(b'{"task": "m.g"}') == ("m.g", [], {})
    for bad in (b"", b"[1]", b'{"task": 3}', b'{"task": "f", "args": {}}', b"\xff"):
        with pytest.raises(ValueError):
            decode_call(bad)
    with pytest.raises(TypeError, match="argument 0"):
        encode_call("m.f", [object()], {})


def test_bodies_decode_exactly_as_json_loads_would() -> None:
    # The worker's shortcut (a UTF-8 body scanned from its first byte) must give what
    # json.loads gives, value or error message, whatever the bytes.
    bodies = [b'{"task":"m.f","args":[],"kwargs":{}}', b'{"a":1}  \n', b'{"a":1} x', b'{"a":',
              b"{", b"{}", b"[1]", b' {"a":1}', '{"a":"\u00e9"}'.encode(), b'{"a":"\xff"}',
              '{"a":1}'.encode("utf-16-le"), '{"a":1}'.encode("utf-16"),
              b'\xef\xbb\xbf{"a":1}', b"{\x00", b'{"a":"\\ud800"}', b'{"a":1}{"b":2}']

    def outcome(load: Any, body: bytes) -> tuple[str, Any]:
        try:
            return "value", load(body)
        except Exception as exc:  # noqa: BLE001 - the error is what is compared
            return type(exc).__name__, str(exc)

    for body in bodies:
        assert outcome(_loads, body) == outcome(json.loads, body), body


def test_a_bad_call_is_refused_per_shape_as_signature_bind_refuses_it(q: sqlq.Queue) -> None:
    # bind_error keeps its answer per call shape (argument count, keyword names): the
    # answer must be Signature.bind's for every shape, the first time and from memory.
    @q.task(name="shapes.f")
    def f(a: int, b: int = 1, *, c: int = 2) -> None: ...

    assert f.signature is not None
    shapes: list[tuple[list[Any], dict[str, Any]]] = [
        ([], {}), ([1], {}), ([1, 2], {"c": 3}), ([1, 2, 3], {}), ([1], {"d": 1}),
        ([1], {"a": 2}), ([], {"b": 1, "a": 1}), ([1], {"d": 1, "e": 2}), ([1], {"e": 2, "d": 1})]
    for _ in range(2):
        for args, kwargs in shapes:
            try:
                f.signature.bind(*args, **kwargs)
                expected = None
            except TypeError as exc:
                expected = str(exc)
            assert f.bind_error(args, kwargs) == expected, (args, kwargs)
    for i in range(BIND_SHAPES * 2):
        f.bind_error([1], {f"k{i}": 0})
    assert len(f._binds) <= BIND_SHAPES
    # Through the worker's runner: every job of a bad shape is buried with the reason.
    for _ in range(2):
        q.put(encode_call("shapes.f", [], {"z": 1}))
        job = q.reserve(timeout=0)
        assert job is not None
        outcome = TaskRunner().start(job).wait(0)
        assert outcome is not None and outcome.status == "bury"
        assert outcome.reason == "bad arguments: missing a required argument: 'a'"
        job.delete()


def test_retry_policy_counts_attempts_and_backs_off_exponentially() -> None:
    policy = RetryPolicy(retries=3, backoff=2.0)
    assert [policy.should_retry(n) for n in (1, 2, 3, 4)] == [True, True, True, False]
    assert not policy.exhausted(3) and policy.exhausted(4)
    for attempt, base in ((1, 2.0), (2, 4.0), (3, 8.0)):
        delays = [policy.delay_for(attempt) for _ in range(50)]
        assert all(base <= d <= base + 2.0 for d in delays), (attempt, delays)
        assert len(set(delays)) > 1  # jittered
    assert RetryPolicy(backoff=1).delay_for(40) == 3600.0  # capped
    fixed = RetryPolicy(retries=1, backoff=tenacity.wait_fixed(7))
    assert fixed.delay_for(1) == fixed.delay_for(5) == 7
    assert RetryPolicy(retries=0).should_retry(1) is False
    with pytest.raises(ValueError):
        RetryPolicy(retries=-1)
    with pytest.raises(TypeError):
        RetryPolicy(backoff="soon")  # type: ignore[arg-type]


def test_worker_loop_in_process(q: sqlq.Queue) -> None:
    """The loop itself, without a subprocess: result, retry with delay, bury."""
    calls: list[int] = []

    @q.task(tube="inproc", retries=1, backoff=100)
    def half(n: int) -> float:
        calls.append(n)
        if n < 0:
            raise ValueError(f"negative: {n}")
        return n / 2

    ok, bad = half.put(3), half.put(-1)
    runner = TaskRunner({half.name: half})
    worker = Worker(q, runner, ["inproc"], burst=True)
    assert worker.run() == 2
    assert json.loads(q.result(ok, timeout=0)) == 1.5
    job = q.peek(bad)
    assert job is not None and job.state == "delayed" and job.releases == 1
    assert job.delay_until is not None and job.delay_until - job.created_at >= 99_000
    q.kick_job(bad)
    assert Worker(q, runner, ["inproc"], burst=True).run() == 1
    job = q.peek(bad)
    assert job is not None and job.state == "buried"
    assert job.bury_reason == "ValueError: negative: -1"
    q.kick_job(bad)  # a kick is one more run (not "gave up": those runs did finish)
    assert Worker(q, runner, ["inproc"], burst=True).run() == 1
    assert calls == [3, -1, -1, -1]
    assert q.peek(bad).bury_reason == "ValueError: negative: -1"  # type: ignore[union-attr]
    runner.close()
