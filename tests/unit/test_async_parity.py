"""The async face cannot drift from the synchronous one.

AsyncQueue, AsyncJob and AsyncTransaction derive most verbs from Queue, Job and
Transaction (``asyncq.awaited``: the same function's signature); the few written by
hand (the waiting verbs) must still match. These tests compare every public name
and every parameter (name, kind, default, annotation) of each pair, with the few
differences that are on purpose listed here, each with its reason: a new verb on
one side, a changed default or a renamed parameter fails until both agree.
"""

from __future__ import annotations

import asyncio
import inspect
from typing import Any

import sqlq
from sqlq.asyncq import AsyncTransaction
from sqlq.model import JOB_FIELDS

#: Names only the synchronous Queue has, and why.
QUEUE_ONLY = {
    "task": "a task's .put() enqueues synchronously; AsyncQueue.put_task enqueues a call",
    "periodic": "periodic tasks are run by `sqlq work`, which takes a Queue",
    "enqueue_periodic": "the periodic scheduler's, inside `sqlq work`",
    "record_durations": "a worker's histograms, written by `sqlq work`",
    "lock_wait": "a setting of the Queue underneath (aq.queue.lock_wait)",
    "engine": "the reservation engine, for sqlq's own faces",
    "verbs": "the verb contract (sqlq/verbs/), for sqlq's own faces",
    "operations": "the other verbs (sqlq/verbs/operations.py), for sqlq's own faces",
    "verbs_in": "the verbs in a connection's transaction (Job.step(conn=)), for sqlq's own faces",
    "backend": "the storage backend, for tools built on sqlq (aq.queue.backend)",
    "path": "as given to the constructor (aq.queue.path)",
    "max_job_size": "as given to the constructor (aq.queue.max_job_size)",
    "result_ttl_ms": "as given to the constructor (aq.queue.result_ttl_ms)",
}
#: Names only AsyncQueue has, and why.
ASYNC_ONLY = {
    "queue": "the synchronous Queue underneath",
    "open": "opens the Queue off the loop (the constructor never blocks)",
    "put_task": "enqueues a call of a task (Queue's tasks do it with task.put)",
    "call_in_thread": "runs several Queue calls in the AsyncQueue's thread",
    "jobs": "reserves in a loop (async for); Queue's loop is a worker's",
}
#: Names both have with different meanings, on purpose.
DIFFERENT = {
    "views": "Queue.views is a Views; AsyncQueue.views an AsyncViews, its reads awaited "
             "(test_asyncviews_has_every_read_of_views)",
}
#: AsyncJob and AsyncTransaction wrap a synchronous object.
HANDLE_ONLY = {"sync", "aq"}
#: Job's constructors from database rows: not a handle's business.
JOB_ONLY = {"from_claim", "from_row"}


def _public(cls: type, instance: object | None = None) -> set[str]:
    names = {n for n in dir(cls) if not n.startswith("_")}
    if instance is not None:
        names |= {n for n in vars(instance) if not n.startswith("_")}
    return names


def _normalised(annotation: Any) -> str:
    """An annotation with the async face's own types read as the synchronous ones
    (``AsyncJob | Job`` accepted where a Job is: the same parameter)."""
    text = str(annotation)
    for a, b in (("AsyncJob | Job", "Job"), ("AsyncJob", "Job"),
                 ("AsyncTransaction", "Transaction"), ("AsyncQueue", "Queue")):
        text = text.replace(a, b)
    return text


def differences(sync: Any, other: Any, name: str) -> list[str]:
    """How the member ``name`` of two classes differs: kind, parameters, coroutine-ness."""
    a, b = inspect.getattr_static(sync, name), inspect.getattr_static(other, name)
    if isinstance(a, property) or isinstance(b, property):
        return [] if isinstance(a, property) and isinstance(b, property) else \
            [f"{name}: a property on one side only"]
    if not callable(a) or not callable(b):
        return [] if callable(a) == callable(b) else [f"{name}: callable on one side only"]
    found = []
    sa, sb = inspect.signature(getattr(sync, name)), inspect.signature(getattr(other, name))
    pa = [p for p in sa.parameters.values() if p.name != "self"]
    pb = [p for p in sb.parameters.values() if p.name != "self"]
    if [(p.name, p.kind, p.default) for p in pa] != [(p.name, p.kind, p.default) for p in pb]:
        found.append(f"{name}: parameters {sa} != {sb}")
    for p, q in zip(pa, pb, strict=False):
        if _normalised(p.annotation) != _normalised(q.annotation):
            found.append(f"{name}({p.name}): {p.annotation} != {q.annotation}")
    is_async = inspect.iscoroutinefunction(getattr(other, name)) or \
        inspect.isasyncgenfunction(getattr(other, name))
    if not is_async and name not in ("json", "text", "aq", "sync"):
        found.append(f"{name}: not a coroutine on the async side")
    return found


def test_asyncqueue_has_every_verb_of_queue_with_the_same_parameters(db_path: str) -> None:
    with sqlq.Queue(db_path) as q:
        queue_names = _public(sqlq.Queue, q)
    async_names = _public(sqlq.AsyncQueue, sqlq.AsyncQueue(db_path))
    assert queue_names - async_names == set(QUEUE_ONLY)
    assert async_names - queue_names == set(ASYNC_ONLY)
    found = []
    for name in sorted(queue_names & async_names - set(DIFFERENT)):
        if name in ("close", "transaction"):
            continue  # no parameters; async by construction (checked below)
        found += differences(sqlq.Queue, sqlq.AsyncQueue, name)
    assert found == []
    assert inspect.iscoroutinefunction(sqlq.AsyncQueue.close)


def test_asyncviews_has_every_read_of_views(db_path: str) -> None:
    """``aq.views`` is ``q.views`` awaited: the same reads, the same parameters."""
    from sqlq.asyncq import AsyncViews
    from sqlq.verbs import Views

    assert isinstance(sqlq.AsyncQueue(db_path).views, AsyncViews)
    assert _public(Views) - {"dispatch", "store"} == _public(AsyncViews) - {"aq"}
    found = []
    for name in sorted(_public(AsyncViews) - {"aq"}):
        found += differences(Views, AsyncViews, name)
    assert found == []


def test_asyncjob_has_every_field_and_verb_of_job() -> None:
    assert tuple(sqlq.AsyncJob.__annotations__) == JOB_FIELDS
    job_names = _public(sqlq.Job) | set(JOB_FIELDS)
    async_names = _public(sqlq.AsyncJob)
    assert job_names - async_names == JOB_ONLY
    assert async_names - job_names == HANDLE_ONLY
    found = []
    for name in sorted(job_names & async_names - set(JOB_FIELDS)):
        found += differences(sqlq.Job, sqlq.AsyncJob, name)
    assert found == []


def test_asynctransaction_has_every_verb_of_transaction() -> None:
    names = _public(sqlq.Transaction) | {"queue"}
    async_names = _public(AsyncTransaction) | {"queue", "sync"}  # set by __init__
    assert async_names - names == HANDLE_ONLY
    assert names - async_names == set()
    found = []
    for name in sorted(names & async_names - {"queue"}):
        found += differences(sqlq.Transaction, AsyncTransaction, name)
    assert found == []


def test_the_comparison_sees_a_changed_default_a_new_parameter_and_a_sync_verb() -> None:
    """The checks above can fail: a drifted verb is named."""

    class Drifted:
        async def peek(self, job_id: int, extra: int = 0) -> None: ...
        async def touch(self, job_id: int, *, lease: int | None = 5) -> int: ...
        def kick_job(self, job_id: int) -> None: ...
        async def pause_tube(self, tube: str, seconds: int) -> None: ...

    assert differences(sqlq.Queue, Drifted, "peek")
    assert differences(sqlq.Queue, Drifted, "touch")
    assert differences(sqlq.Queue, Drifted, "kick_job")
    assert differences(sqlq.Queue, Drifted, "pause_tube")  # float became int


def test_asyncjob_reads_every_field_of_its_job(db_path: str) -> None:
    async def main() -> None:
        async with sqlq.AsyncQueue(db_path) as aq:
            await aq.put(b"x", tube="t", delay=0)
            job = await aq.reserve("t", timeout=0)
            assert job is not None
            for name in JOB_FIELDS:
                assert getattr(job, name) == getattr(job.sync, name), name
            assert job.delay == 0.0
            await job.release(delay=2)
            assert job.state == "delayed"
            peeked = await aq.peek(job.id)
            assert peeked is not None and peeked.delay == 2.0

    asyncio.run(main())


def test_derived_verbs_keep_the_queue_signature_and_docs() -> None:
    assert inspect.signature(sqlq.AsyncQueue.put) == inspect.signature(sqlq.Queue.put)
    assert sqlq.AsyncQueue.stats_tube.__doc__ is not None
    assert "sqlq.Queue.stats_tube" in sqlq.AsyncQueue.stats_tube.__doc__
    assert sqlq.AsyncQueue.stats_tube.__qualname__ == "AsyncQueue.stats_tube"


def test_queue_has_no_jobs_alias_of_job_page(db_path: str) -> None:
    """``Queue.jobs`` (a deprecated alias of job_page) is gone: ``AsyncQueue.jobs``
    reserves in a loop, one name, one meaning."""
    with sqlq.Queue(db_path) as q:
        assert not hasattr(q, "jobs")


def test_derived_verbs_call_an_overriding_subclass(db_path: str) -> None:
    """The derived verbs call the Queue's method by name: a subclass that overrides one
    (to log, to add a default) is obeyed inside a transaction and through an AsyncQueue."""
    seen: list[str] = []

    class Audited(sqlq.Queue):
        def put(self, body: bytes | str, **options: Any) -> int:
            seen.append(options.get("tube", "default"))
            return super().put(body, **options)

    with Audited(db_path) as q:
        with q.transaction() as tx:
            tx.put(b"a", tube="tx")

        async def main() -> None:
            aq = sqlq.AsyncQueue(q)
            await aq.put(b"b", tube="async")
            await aq.close()

        asyncio.run(main())
        assert seen == ["tx", "async"]
        assert q.stats()["current-jobs-ready"] == 2
