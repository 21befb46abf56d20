"""The verbs that do not put or change jobs (sqlq/verbs/operations.py): each defined
once, beside the contract's, and the faces that used to open transactions of their own
for them now call them."""

from __future__ import annotations

import ast
from pathlib import Path

import sqlq
from sqlq.verbs import OPERATIONS, VERBS

SQLQ = Path(sqlq.__file__).parent
#: Faces whose transactions became verbs (issue 35): none may open one again.
FACES = ["limits.py", "flow.py", "throughput.py", "attempts.py", "control.py", "results.py",
         "copy.py", "server/stats.py", "work/presence.py", "work/cancel.py",
         "work/worker.py", "work/aworker.py"]
#: How a face reaches past the verbs: a backend's own runners.
RUNNERS = {"write", "read", "write_shared", "transaction"}


def test_each_operation_has_one_name_of_its_own() -> None:
    names = [verb.name for verb in OPERATIONS]
    assert len(names) == len(set(names))
    assert not set(names) & {verb.name for verb in VERBS}


def test_the_faces_open_no_transaction_of_their_own() -> None:
    found = []
    for name in FACES:
        tree = ast.parse((SQLQ / name).read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                    and node.func.attr in RUNNERS and "backend" in ast.unparse(node.func.value):
                found.append(f"{name}:{node.lineno}: {ast.unparse(node)[:60]}")
    assert found == []
