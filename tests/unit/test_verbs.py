"""The verb contract as one list (sqlq/verbs/): each name has one meaning, and outside the
verbs and the backends no module runs a transaction on a backend itself (issue 35)."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path
from typing import Any

import sqlq
from sqlq.asynchandles import AsyncJob, AsyncTransaction
from sqlq.asyncq import AsyncQueue
from sqlq.verbs import ALL, CLAIMS, FREES, OPERATIONS, READIES, READS, VERBS, WAKES

SQLQ = Path(sqlq.__file__).parent
#: A backend's own runners: what only the dispatcher (and the backends) may call.
RUNNERS = {"write", "read", "write_shared", "transaction"}
#: The transactions a face still opens, and why: the application's own
#: (``with q.transaction()``, the public API), and ``sqlq serve``'s group commit of one
#: round of its clients' writes (a savepoint each, one fsync).
ALLOWED = {("queue.py", "transaction"), ("server/batch.py", "transaction")}


def test_every_record_is_in_the_one_list_once() -> None:
    assert len(ALL) == len(VERBS) + len(OPERATIONS) + len(READS) + len(CLAIMS)
    assert len({id(verb) for verb in ALL}) == len(ALL)


def test_one_name_one_kind_of_span() -> None:
    """A name shared by several records (a put that reads first, a claim that deletes
    first) is the same operation: the same span's operation type."""
    ops: dict[str, set[str | None]] = {}
    for verb in ALL:
        ops.setdefault(verb.name, set()).add(verb.op)
    assert {name: found for name, found in ops.items() if len(found) > 1} == {}


def test_no_face_runs_a_transaction_on_a_backend() -> None:
    found = []
    for path in sorted(SQLQ.rglob("*.py")):
        name = path.relative_to(SQLQ).as_posix()
        if name.startswith(("backends/", "verbs/")):
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                    and node.func.attr in RUNNERS and "backend" in ast.unparse(node.func.value) \
                    and (name, node.func.attr) not in ALLOWED:
                found.append(f"{name}:{node.lineno}: {ast.unparse(node)[:70]}")
    assert found == []


def test_what_a_commit_gives_waiters_is_said_once_per_name() -> None:
    """WAKES gives every name the one value its records agree on; the one name whose
    records differ ("reserve": a claim alone, or a delete and a claim) is left to its
    face. A verb that ends a held job frees its slot; one that can make a job ready, or
    a result final, readies."""
    assert {verb.name for verb in ALL} - set(WAKES) == {"reserve"}
    assert {name for name, wakes in WAKES.items() if wakes == FREES} == {
        "delete", "delete_many", "bury", "snooze"}
    assert {name for name, wakes in WAKES.items() if wakes == READIES} == {
        "put", "put_many", "publish", "enqueue_periodic", "release", "retry", "give_back",
        "complete", "kick", "kick_job", "postpone", "pause_tube", "limit"}


def _pokes(method: Any) -> bool | None:
    """Whether a face's method made by asyncq.awaited or asynchandles.sync_verb pokes this
    process's waiters (None: a method written by hand)."""
    found = inspect.getclosurevars(method).nonlocals.get("pokes")
    return None if found is None else bool(found)


def test_the_async_faces_wake_as_the_verbs_records_say() -> None:
    """No async face decides for itself: each derived verb pokes exactly when its record
    says its commit may give waiters something; a transaction's verbs never do (its
    commit does, asyncq.transaction)."""
    checked = 0
    for cls in (AsyncQueue, AsyncJob):
        for name, method in vars(cls).items():
            if callable(method) and _pokes(method) is not None:
                assert _pokes(method) == bool(WAKES.get(name)), f"{cls.__name__}.{name}"
                checked += 1
    assert checked > 40
    assert {name: _pokes(method) for name, method in vars(AsyncTransaction).items()
            if callable(method) and _pokes(method) is not None} == {
        "execute": False, "put": False, "put_many": False, "publish": False}
    assert _pokes(AsyncQueue.delete) and _pokes(AsyncJob.delete) and _pokes(AsyncQueue.limit)


def test_the_server_names_verbs_the_records_know() -> None:
    """``sqlq serve`` tells its waiters which verb ran (Waiters.after); each name is one
    WAKES knows (a wrong one would fail only when that command ran)."""
    named = [node.args[0].value
             for path in sorted((SQLQ / "server").glob("*.py"))
             for node in ast.walk(ast.parse(path.read_text()))
             if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
             and node.func.attr == "after" and node.args
             and isinstance(node.args[0], ast.Constant)]
    assert sorted(set(named)) == ["bury", "delete", "kick", "kick_job", "pause_tube", "put",
                                  "release"]
    assert set(named) <= set(WAKES)
