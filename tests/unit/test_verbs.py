"""The verb contract as one list (sqlq/verbs/): each name has one meaning, and outside the
verbs and the backends no module runs a transaction on a backend itself (issue 35)."""

from __future__ import annotations

import ast
from pathlib import Path

import sqlq
from sqlq.verbs import ALL, CLAIMS, OPERATIONS, READS, VERBS

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
