"""The verbs that do not put or change jobs (sqlq/verbs/operations.py): each defined
once, beside the contract's, and the faces that used to open transactions of their own
for them now call them."""

from __future__ import annotations

import ast
from pathlib import Path

import sqlq
from sqlq.verbs import OPERATIONS, VERBS

SQLQ = Path(sqlq.__file__).parent
#: How a face reaches past the verbs: a backend's own runners.
RUNNERS = {"write", "read", "write_shared", "transaction"}
#: The faces' transactions that are the face's own point, not a verb's (file -> calls):
#: ``Queue.transaction()``, the application's transaction that sqlq's puts join, and
#: ``sqlq serve``'s round of pipelined commands, one commit (savepoints inside it).
OWN = {"queue.py": 1, "server/batch.py": 2}


def test_each_operation_has_one_name_of_its_own() -> None:
    names = [verb.name for verb in OPERATIONS]
    assert len(names) == len(set(names))
    assert not set(names) & {verb.name for verb in VERBS}


def test_the_faces_open_no_transaction_of_their_own() -> None:
    """Every module outside the verbs and the backends (issue 35: 17 modules once opened
    transactions of their own)."""
    found: dict[str, list[str]] = {}
    for path in sorted(SQLQ.rglob("*.py")):
        name = path.relative_to(SQLQ).as_posix()
        if name.startswith(("verbs/", "backends/")):
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                    and node.func.attr in RUNNERS and "backend" in ast.unparse(node.func.value):
                found.setdefault(name, []).append(f"{node.lineno}: {ast.unparse(node)[:60]}")
    assert {name: len(calls) for name, calls in found.items()} == OWN, found
