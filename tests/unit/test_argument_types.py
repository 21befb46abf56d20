"""A wrong type or value for any public argument raises TypeError or ValueError naming it.

README.md promises it; before this test ``q.put(b"x", tube=["a"])`` said "unhashable
type: 'list'" and ``q.delete("7")`` said "not found". Every argument of the verbs
below gets every wrong kind of value, and the file must be left unchanged.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

import sqlq

pytestmark = pytest.mark.both_apis  # q and fq: as a Queue, then as an AsyncQueue

Call = Callable[[sqlq.Queue, dict[str, Any]], object]

# verb -> (call with defaults overridable by keyword, the arguments to spoil)
VERBS: dict[str, tuple[Call, tuple[str, ...]]] = {
    "put": (lambda q, kw: q.put(**{"body": b"x", **kw}),
            ("body", "tube", "priority", "delay", "ttr", "unique_key", "after",
             "on_conflict", "group")),
    "put_many": (lambda q, kw: q.put_many(**{"bodies": [b"x"], **kw}),
                 ("bodies", "tube", "priority", "delay", "ttr", "after", "group")),
    "reserve": (lambda q, kw: q.reserve(**{"timeout": 0, **kw}),
                ("tubes", "timeout", "delete", "detach")),
    "reserve_many": (lambda q, kw: q.reserve_many(**{"n": 2, "timeout": 0, **kw}),
                     ("n", "tubes", "timeout", "delete")),
    "delete_many": (lambda q, kw: q.delete_many(**{"jobs": [], **kw}), ("jobs",)),
    "release": (lambda q, kw: q.release(**{"job_id": 1, **kw}),
                ("job_id", "priority", "delay", "lease")),
    "bury": (lambda q, kw: q.bury(**{"job_id": 1, **kw}),
             ("job_id", "priority", "reason", "lease")),
    "delete": (lambda q, kw: q.delete(**{"job_id": 1, **kw}), ("job_id", "lease", "by")),
    "touch": (lambda q, kw: q.touch(**{"job_id": 1, **kw}), ("job_id", "lease")),
    "complete": (lambda q, kw: q.complete(**{"job_id": 1, **kw}), ("job_id", "result", "lease")),
    "kick": (lambda q, kw: q.kick(**{"bound": 1, **kw}), ("bound", "tube")),
    "kick_job": (lambda q, kw: q.kick_job(**{"job_id": 1, **kw}), ("job_id",)),
    "peek": (lambda q, kw: q.peek(**{"job_id": 1, **kw}), ("job_id",)),
    "peek_ready": (lambda q, kw: q.peek_ready(**kw), ("tube",)),
    "stats_tube": (lambda q, kw: q.stats_tube(**{"tube": "t", **kw}), ("tube",)),
    "stats_job": (lambda q, kw: q.stats_job(**{"job_id": 1, **kw}), ("job_id",)),
    "result": (lambda q, kw: q.result(**{"job_id": 1, "timeout": 0, **kw}),
               ("job_id", "timeout", "on_progress")),
    "cancel": (lambda q, kw: q.cancel(**{"job_id": 1, **kw}), ("job_id", "by")),
    "progress": (lambda q, kw: q.progress(**{"job_id": 1, "value": 0.5, **kw}),
                 ("job_id", "value", "message", "lease")),
    "pause_tube": (lambda q, kw: q.pause_tube(**{"tube": "t", "seconds": 0, **kw}),
                   ("tube", "seconds")),
    "limit": (lambda q, kw: q.limit(**{"tube": "t", "concurrency": 2, **kw}),
              ("tube", "concurrency", "rate", "group_concurrency", "group_rate")),
    "subscribe": (lambda q, kw: q.subscribe(**{"topic": "o", "tube": "t", **kw}),
                  ("topic", "tube")),
    "publish": (lambda q, kw: q.publish(**{"topic": "o", "body": b"x", **kw}),
                ("topic", "body", "priority", "delay", "ttr", "unique_key", "on_conflict")),
}

# Values no argument above accepts, except where VALID says so.
WRONG: dict[str, object] = {
    "list": ["a"], "dict": {"a": 1}, "object": object(), "nan": float("nan"), "negative": -1,
    "bool": True, "bytes": b"a", "str": "x", "float": 1.5, "none": None,
}
VALID: dict[str, set[str]] = {  # argument -> the WRONG keys that are in fact right for it
    "body": {"bytes", "str"}, "result": {"bytes", "str"}, "tube": {"str"}, "topic": {"str"},
    "tubes": {"list", "dict", "str", "none"}, "unique_key": {"str", "none"},
    "reason": {"str", "none"},
    "delay": {"float"}, "ttr": {"float"}, "timeout": {"float", "none"}, "seconds": {"float"},
    "delete": {"none"}, "detach": {"bool"}, "lease": {"none", "negative"},
    "priority": {"none"}, "bodies": {"list", "dict"}, "job_id": {"negative"},
    "after": {"none", "negative"},  # -1: an id no job can have (JobNotFound)
    "on_progress": {"none"}, "value": {"float"}, "message": {"str", "none"},
    "concurrency": {"none"}, "rate": {"none"},  # None removes a limit
    "group_concurrency": {"none"}, "group_rate": {"none"}, "group": {"str", "none"},
    "by": {"str", "none"},  # who deleted or cancelled, kept in the job's record
}
# Arguments that may be None where None means "unchanged" (release/bury's priority only).
NONE_OK_ONLY_IN = {"priority": {"release", "bury"}}

CASES = [
    pytest.param(verb, arg, key, id=f"{verb}-{arg}-{key}")
    for verb, (_, args) in VERBS.items() for arg in args for key in WRONG
    if key not in VALID.get(arg, set())
    or (key == "none" and arg in NONE_OK_ONLY_IN and verb not in NONE_OK_ONLY_IN[arg])
]


# Arguments are checked above the storage seam, the same code for every backend: once
# on a file is enough (the suites that run on both backends cover what lies below).
@pytest.mark.face
@pytest.mark.parametrize(("verb", "arg", "key"), CASES)
def test_a_wrong_argument_is_named(q: sqlq.Queue, verb: str, arg: str, key: str) -> None:
    call, _ = VERBS[verb]
    before = q.stats()["total-jobs"]
    with pytest.raises((TypeError, ValueError)) as raised:
        call(q, {arg: WRONG[key]})
    message = str(raised.value)
    assert arg in message or (arg == "tube" and "tube" in message), message
    assert "unhashable" not in message and "binding" not in message, message
    assert q.stats()["total-jobs"] == before


@pytest.mark.parametrize("path", [123, ["a.db"], None.__class__])
def test_a_wrong_path_is_named(path: object) -> None:
    with pytest.raises(TypeError, match="path must be"):
        sqlq.Queue(path)  # type: ignore[arg-type]


def test_every_argument_of_every_verb_is_tried() -> None:
    import inspect

    for verb, (_, args) in VERBS.items():
        params = [p for p in inspect.signature(getattr(sqlq.Queue, verb)).parameters
                  if p != "self"]
        assert set(args) == set(params), verb


@pytest.mark.parametrize(("priority", "delay", "ttr", "unique_key", "expected"), [
    (True, 0, 60.0, None, TypeError),        # a bool is an int subclass, not an int
    (1.0, 0, 60.0, None, TypeError),
    (-1, 0, 60.0, None, ValueError),
    (2**32, 0, 60.0, None, ValueError),
    (0, False, 60.0, None, TypeError),
    (0, 0, float("nan"), None, ValueError),
    (0, 0, 60.0, 5, TypeError),
    (0, 0, 60, None, (0, 60_000)),           # an int TTR takes the checks, same result
    (0, 0.0, 60.0, None, (0, 60_000)),
    (0, 0, 0.5, None, (0, 1_000)),            # raised to one second
    (2**32 - 1, 0, 60.0, None, (0, 60_000)),
])
def test_the_put_options_hot_path_refuses_what_the_checks_refuse(
        priority: object, delay: object, ttr: object, unique_key: object,
        expected: type[Exception] | tuple[int, int]) -> None:
    """check_put_options tests the defaults in one condition before its checks: nothing
    the checks refuse may slip through it, and what it accepts gives what they give."""
    from sqlq.putting import check_put_options

    if isinstance(expected, tuple):
        assert check_put_options(priority, delay, ttr, unique_key) == expected
    else:
        with pytest.raises(expected):
            check_put_options(priority, delay, ttr, unique_key)
