"""Importable tasks for the workflow tests (``sqlq work --import tests.flow_jobs``): a
chain's steps that log their order, and a chord's parts and the final task that reads
their results (tests/integration/test_workflows.py)."""

from __future__ import annotations

import json
import os

import sqlq

from .workers import private_db

q = sqlq.Queue(os.environ.get("SQLQ_DB") or private_db())


@q.task(tube="flow")
def step(path: str, name: str) -> None:
    """A chain's step: appends its name, so the test sees the order they ran in."""
    with open(path, "a") as f:
        f.write(name + "\n")


@q.task(tube="flow")
def count(text: str) -> int:
    return len(text.split())


@q.task(tube="flow")
def total(parents: list[int], label: str) -> str:
    """A chord's final task: its parents' results, read by id (kept by complete)."""
    return f"{label}: {sum(json.loads(q.result(i, timeout=0)) for i in parents)}"
