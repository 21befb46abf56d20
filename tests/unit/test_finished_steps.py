"""A job's durable steps and cursors on its finished record (issue 40's last line): read
by the statement that ends the job, before its steps go with it (sqlq_forget_steps), on
every path a job ends by; a job without steps keeps none. Every backend, both APIs."""

from __future__ import annotations

from typing import Any

import pytest

import sqlq
from sqlq.finished import Finished

pytestmark = [pytest.mark.both_apis, pytest.mark.sqlite3_driver]


def _reserve(q: sqlq.Queue) -> sqlq.Job:
    job = q.reserve(timeout=0)
    assert job is not None
    return job


def _record(q: sqlq.Queue, job_id: int) -> Finished:
    record = q.finished(job_id)
    assert record is not None, f"job {job_id} left no record"
    return record


def _work(q: sqlq.Queue, job: sqlq.Job, tag: str) -> dict[str, Any]:
    """Two steps and a cursor saved twice: what the record must keep, as stats_job
    shows them on the live job."""
    job.step("fetch", lambda: {"rows": 3, "tag": tag})
    job.step("charge", lambda: [1, "two", None])
    job.save_cursor("row", 1)
    job.save_cursor("row", {"at": 2})
    live = q.stats_job(job.id)
    return {"steps": live["steps"], "cursors": live["cursors"]}


def _assert_kept(record: Finished, live: dict[str, Any], tag: str) -> None:
    assert sorted((s["name"], s["value"]) for s in record.steps) == [
        ("charge", [1, "two", None]), ("fetch", {"rows": 3, "tag": tag})]
    assert all(s["finished_at"] > 0 for s in record.steps)
    assert [(c["name"], c["value"]) for c in record.cursors] == [("row", {"at": 2})]
    assert record.cursors[0]["saved_at"] > 0
    assert {"steps": record.steps, "cursors": record.cursors} == live  # the same shapes
    doc = record.as_dict()
    assert doc["steps"] == record.steps and doc["cursors"] == record.cursors


def test_a_completed_job_keeps_its_steps_and_cursors(q: sqlq.Queue) -> None:
    jid = q.put(b"x")
    job = _reserve(q)
    live = _work(q, job, "done")
    job.complete(b"ok")
    record = _record(q, jid)
    assert record.outcome == "done"
    _assert_kept(record, live, "done")
    assert q.views.steps(jid) == []  # the rows themselves went with the job


def test_a_job_without_steps_keeps_none(q: sqlq.Queue) -> None:
    jid = q.put(b"x")
    _reserve(q).delete()
    other = q.put(b"y")
    q.delete(other)
    for record in (_record(q, jid), _record(q, other)):
        assert record.steps == [] and record.cursors == []
        assert record.as_dict()["steps"] == []


def test_a_cancelled_job_keeps_its_steps(q: sqlq.Queue) -> None:
    running = q.put(b"long")
    live = _work(q, _reserve(q), "cancelled")
    q.cancel(running, by="dashboard")
    record = _record(q, running)
    assert record.outcome == "cancelled"
    _assert_kept(record, live, "cancelled")


def test_a_job_deleted_by_id_after_a_release_keeps_its_steps(q: sqlq.Queue) -> None:
    jid = q.put(b"x")
    job = _reserve(q)
    live = _work(q, job, "deleted")
    job.release()
    q.delete(jid)
    _assert_kept(_record(q, jid), live, "deleted")


def test_every_worker_path_keeps_the_steps(q: sqlq.Queue) -> None:
    ids = q.put_many([b"a", b"b", b"c", b"d"])
    first = _reserve(q)
    lives = [_work(q, first, "a")]
    second = q.reserve(timeout=0, delete=first)  # the worker's delete-and-claim
    assert second is not None
    lives.append(_work(q, second, "b"))
    batch = q.reserve_many(2, timeout=0, delete=[second])  # a batch worker's
    assert len(batch) == 2
    lives.append(_work(q, batch[0], "c"))
    q.delete_many(batch)
    for jid, live, tag in zip(ids[:3], lives, "abc", strict=True):
        _assert_kept(_record(q, jid), live, tag)
    assert _record(q, ids[3]).steps == []  # the batch's other job: none of its own


def test_a_job_with_dependents_keeps_its_steps(q: sqlq.Queue) -> None:
    parent = q.put(b"parent")
    child = q.put(b"child", after=[parent])
    job = _reserve(q)
    live = _work(q, job, "parent")
    job.delete()  # delete_linked_job: the record written beside the delete
    _assert_kept(_record(q, parent), live, "parent")
    waiting = _reserve(q)
    assert waiting.id == child
    live = _work(q, waiting, "child")
    waiting.release()
    orphan = q.put(b"p2")
    kid = q.put(b"c2", after=[orphan])
    q.delete(child)  # by id, with no edges left: delete_job
    _assert_kept(_record(q, child), live, "child")
    q.delete(kid)  # by id, waiting on a parent: delete_linked_job
    assert _record(q, kid).steps == []


def test_a_name_json_must_escape_is_kept(q: sqlq.Queue) -> None:
    """SQLite's trigger quotes names with json_group_array (migration 0009): a quote, a
    backslash, a tab and a non-ASCII letter come back as they went in."""
    jid = q.put(b"x")
    job = _reserve(q)
    name = 'a "quoted"\\ name\twith é'
    job.step(name, lambda: {"k": "v"})
    job.delete()
    assert [(s["name"], s["value"]) for s in _record(q, jid).steps] == [(name, {"k": "v"})]


@pytest.mark.parametrize("text", [
    # PostgreSQL's form, and SQLite's records written before migration 0009.
    '[{"kind":1,"name":"row","value":{"at":2},"at":7},'
    '{"kind":0,"name":"fetch","value":[1,null],"at":5}]',
    # SQLite's trigger since migration 0009: [kinds, names, values, times].
    '[[1,0],["row","fetch"],[{"at":2},[1,null]],[7,5]]',
])
def test_both_forms_of_a_record_read_the_same(text: str) -> None:
    from sqlq.steps import recorded_as_dicts

    assert recorded_as_dicts(text) == (
        [{"name": "fetch", "value": [1, None], "finished_at": 5}],
        [{"name": "row", "value": {"at": 2}, "saved_at": 7}])
