"""Workflows of tasks: ``task.options(after=...)``, ``task.s(...)``, ``sqlq.chain`` and
``sqlq.chord`` (sqlq/workflows.py). In-process, both backends; the release rules
themselves are tests/unit/test_dependencies.py's, and tests/integration/test_workflows.py
runs chains and chords through a real ``sqlq work``."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

import sqlq
from sqlq.tasks.task import Task

from ..timing import FakeClock


def _state(q: sqlq.Queue, job_id: int) -> str | None:
    job = q.peek(job_id)
    return None if job is None else job.state


def _finish(q: sqlq.Queue, job_id: int, result: Any = None) -> None:
    """Reserve the job (it must be the one ready in its tube) and complete or delete it."""
    peeked = q.peek(job_id)
    assert peeked is not None
    job = q.reserve(peeked.tube, timeout=0)
    assert job is not None and job.id == job_id, (job, job_id)
    if result is None:
        job.delete()
    else:
        job.complete(json.dumps(result).encode())


def _nothing_put(q: sqlq.Queue) -> bool:
    """No job is in the queue, in any state (``total-jobs`` may count a put rolled back
    on PostgreSQL, whose sequences are not transactional)."""
    stats = q.stats()
    return not any(stats[f"current-jobs-{state}"]
                   for state in ("ready", "delayed", "reserved", "buried", "waiting"))


def _tasks(q: sqlq.Queue) -> tuple[Task[[str], int], Task[[list[int], str], str]]:
    @q.task(tube="words")
    def count(text: str) -> int:
        return len(text.split())

    @q.task(tube="reports")
    def total(parents: list[int], label: str) -> str:
        return f"{label}: {sum(json.loads(q.result(i, timeout=0)) for i in parents)}"

    return count, total


def test_options_after_puts_a_waiting_call(q: sqlq.Queue) -> None:
    count, _ = _tasks(q)
    parent = count.put("a b")
    child = count.options(after=parent).put("c")
    both = count.options(after=[parent, child]).put("d")
    assert (_state(q, child), _state(q, both)) == ("waiting", "waiting")
    assert q.stats()["current-jobs-waiting"] == 2
    _finish(q, parent)
    assert (_state(q, child), _state(q, both)) == ("ready", "waiting")
    _finish(q, child)
    assert _state(q, both) == "ready"
    job = q.peek(both)
    assert job is not None and job.json()["args"] == ["d"] and job.tube == "words"


def test_options_after_counts_the_delay_from_the_release(fq: sqlq.Queue,
                                                         clock: FakeClock) -> None:
    count, _ = _tasks(fq)
    parent = count.put("a")
    child = count.options(after=parent, delay=30).put("b")
    clock.advance(100)  # the delay has not started: the child waits for its parent
    assert _state(fq, child) == "waiting"
    _finish(fq, parent)
    assert _state(fq, child) == "delayed"
    assert fq.stats_job(child)["time-left"] == 30


def test_options_after_checks_ids_when_made_and_when_put(q: sqlq.Queue) -> None:
    count, _ = _tasks(q)
    with pytest.raises(TypeError, match="after must hold job ids"):
        count.options(after=["1"])  # type: ignore[list-item]
    with pytest.raises(TypeError, match="after must be a job id or an iterable"):
        count.options(after="1")  # type: ignore[arg-type]
    with pytest.raises(sqlq.JobNotFound):
        count.options(after=10**9).put("never issued")
    assert _nothing_put(q)


def test_after_needs_a_queue_that_takes_it(q: sqlq.Queue) -> None:
    class Elsewhere:
        """A queue of sqlq.contrib's shape: put without after=."""

        path = q.path

        def put(self, body: bytes | str, **options: Any) -> int:
            return q.put(body, **options)

    task: Task[[int], None, int] = Task(Elsewhere(), lambda n: None, name="flow.elsewhere")
    assert _state(q, task.put(1)) == "ready"
    with pytest.raises(TypeError, match="after= needs a sqlq.Queue; Elsewhere puts without"):
        task.options(after=1).put(2)
    assert q.stats()["total-jobs"] == 1


def test_put_task_of_an_async_queue_takes_after(q: sqlq.Queue, db_url: str) -> None:
    count, _ = _tasks(q)  # declared on a Queue; put from async code into the same database

    async def main() -> tuple[str | None, str | None]:
        async with sqlq.AsyncQueue(db_url, durability="normal") as aq:
            parent = await aq.put(b"parent")
            child = await aq.put_task(count.options(after=parent), "a")
            first = await aq.peek(child)
            await aq.delete(parent)
            then = await aq.peek(child)
            return (None if first is None else first.state,
                    None if then is None else then.state)

    assert asyncio.run(main()) == ("waiting", "ready")


def test_a_signature_is_a_call_not_put_yet(q: sqlq.Queue) -> None:
    count, _ = _tasks(q)
    sig = count.options(priority=5).s("a b")
    assert repr(sig) == f"{count.name}.s('a b')"
    assert (sig.task, sig.args, sig.kwargs, sig.options.priority) == (count, ("a b",), {}, 5)
    assert json.loads(sig.message()) == {"task": count.name, "args": ["a b"], "kwargs": {}}
    assert q.stats()["total-jobs"] == 0


def test_chain_puts_each_step_after_the_one_before(q: sqlq.Queue) -> None:
    count, _ = _tasks(q)
    ids = sqlq.chain(q, count.s("one"), count.s("two two"), count.options(priority=1).s("3"))
    assert ids == sorted(ids) and len(set(ids)) == 3
    assert [_state(q, i) for i in ids] == ["ready", "waiting", "waiting"]
    assert q.stats()["current-jobs-waiting"] == 2
    order = []
    while (job := q.reserve("words", timeout=0)) is not None:
        order.append(job.json()["args"][0])
        assert q.reserve("words", timeout=0) is None  # the next step waits for this one
        job.complete(b"1")
    assert order == ["one", "two two", "3"]
    assert sqlq.chain(q) == []


def test_chain_steps_keep_their_options_and_own_parents(fq: sqlq.Queue,
                                                        clock: FakeClock) -> None:
    count, total = _tasks(fq)
    outside = fq.put(b"outside")
    first, second = sqlq.chain(fq, count.options(after=outside).s("a"),
                               count.options(delay=10, tube="late").s("b"))
    assert (_state(fq, first), _state(fq, second)) == ("waiting", "waiting")
    _finish(fq, outside)
    _finish(fq, first)
    job = fq.peek(second)
    assert job is not None and (job.state, job.tube) == ("delayed", "late")
    assert fq.stats_job(second)["time-left"] == 10


def test_chord_puts_a_group_and_a_final_call_after_all_of_it(q: sqlq.Queue) -> None:
    count, total = _tasks(q)
    texts = ["a", "b c", "d e f"]
    *parts, final = sqlq.chord(q, [count.s(t) for t in texts], total, "words")
    assert [_state(q, i) for i in parts] == ["ready"] * 3 and _state(q, final) == "waiting"
    job = q.peek(final)
    assert job is not None and job.tube == "reports"
    assert job.json() == {"task": total.name, "args": [parts, "words"], "kwargs": {}}
    # the parts finish in any order (completed by id here); the last releases the final
    for i in (parts[2], parts[0]):
        q.complete(i, json.dumps(count(texts[parts.index(i)])).encode())
        assert _state(q, final) == "waiting"
    q.complete(parts[1], b"2")
    assert _state(q, final) == "ready"
    assert total(parts, "words") == "words: 6"  # what the final call reads: the results


def test_chord_with_options_on_the_final_call_and_no_steps(q: sqlq.Queue) -> None:
    _, total = _tasks(q)
    [final] = sqlq.chord(q, [], total.options(priority=3), "none")
    job = q.peek(final)
    assert job is not None and (job.state, job.priority) == ("ready", 3)
    assert job.json()["args"] == [[], "none"]


@pytest.mark.parametrize("bad", ["a parent never issued", "bad arguments", "a bad final call",
                                 "not a step"])
def test_a_bad_step_puts_nothing(q: sqlq.Queue, bad: str) -> None:
    count, total = _tasks(q)
    good = [count.s("a"), count.s("b")]
    with pytest.raises((sqlq.JobNotFound, TypeError)) as raised:
        if bad == "a parent never issued":
            sqlq.chain(q, *good, count.options(after=10**9).s("c"))
        elif bad == "bad arguments":
            sqlq.chain(q, *good, count.s(object()))  # type: ignore[arg-type]
        elif bad == "a bad final call":
            sqlq.chord(q, good, total)  # type: ignore[call-arg]
        else:
            sqlq.chain(q, *good, count)  # type: ignore[arg-type]
    assert _nothing_put(q)
    if bad == "not a step":
        assert "step 2 must be a task.s(...) call, not Task (write task.s(...))" in str(
            raised.value)
    assert len(sqlq.chain(q, *good)) == 2 and q.stats()["current-jobs-waiting"] == 1


def test_workflow_arguments_are_checked(q: sqlq.Queue) -> None:
    count, total = _tasks(q)
    with pytest.raises(TypeError, match="steps must be an iterable of task.s"):
        sqlq.chord(q, count.s("a"), total, "x")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="must be a sqlq.Queue, not str"):
        sqlq.chain("app.db", count.s("a"))  # type: ignore[arg-type]
    assert _nothing_put(q)


def test_a_workflow_joins_the_open_transaction(q: sqlq.Queue) -> None:
    count, total = _tasks(q)
    with pytest.raises(RuntimeError), q.transaction():
        sqlq.chord(q, [count.s("a")], total, "x")
        raise RuntimeError("the application's transaction rolls back")
    assert _nothing_put(q)
    with q.transaction():
        ids = sqlq.chain(q, count.s("a"), count.s("b"))
    assert [_state(q, i) for i in ids] == ["ready", "waiting"]


def test_a_buried_part_holds_the_final_call_until_it_is_deleted(q: sqlq.Queue) -> None:
    """The documented policy (docs/workflows.md): a failed (buried) parent is not gone,
    so its children wait; kicked, it runs again; deleted, it releases them, and its
    result reads as JobNotFound."""
    count, total = _tasks(q)
    first, second, final = sqlq.chord(q, [count.s("a"), count.s("b c")], total, "x")
    q.complete(first, b"1")
    job = q.reserve("words", timeout=0)
    assert job is not None and job.id == second
    job.bury(reason="ValueError: failed")
    assert _state(q, final) == "waiting"
    q.kick_job(second)
    assert _state(q, second) == "ready" and _state(q, final) == "waiting"
    q.delete(second)  # the operator gives up on it: the final call goes ahead
    assert _state(q, final) == "ready"
    with pytest.raises(sqlq.JobNotFound):
        q.result(second, timeout=0)


def test_a_workflow_is_cancelled_by_deleting_its_waiting_steps_last_first(
        q: sqlq.Queue) -> None:
    """Deleting a waiting step releases the steps after it, as any parent gone does: a
    chain is cancelled from its last step back (a chord: its final call first)."""
    count, total = _tasks(q)
    ids = sqlq.chain(q, count.s("a"), count.s("b"), count.s("c"))
    q.delete(ids[1])  # the middle step alone: the last one is released
    assert _state(q, ids[2]) == "ready"
    ids = sqlq.chain(q, count.s("a"), count.s("b"), count.s("c"))
    for job_id in reversed(ids[1:]):
        q.delete(job_id)
    assert [_state(q, i) for i in ids] == ["ready", None, None]
    *parts, final = sqlq.chord(q, [count.s("a")], total, "x")
    q.delete(final)
    assert q.stats()["current-jobs-waiting"] == 0
