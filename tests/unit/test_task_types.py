"""What mypy --strict sees a task's ``put`` return: the job's id of a ``@q.task``, and
``int | None`` for a task of sqlq.contrib's, whose put waits for the application's
commit when its queue is a separate database (and then has no id to give); and what it
checks of a workflow's steps and a chord's final task."""

from __future__ import annotations

import hashlib
import re
import shutil
import tempfile
from pathlib import Path

import pytest
from mypy import api

import sqlq

#: mypy's cache for this checkout, kept between runs (a cold run reads sqlq, Flask,
#: Django and SQLAlchemy: 5-15 s; a warm one about 1 s). mypy checks every cached
#: module against its source, so a stale entry costs time, never a wrong answer.
PACKAGE = Path(sqlq.__file__).resolve().parent
CACHE = Path(tempfile.gettempdir()) / ("sqlq-test-mypy-" + hashlib.sha256(
    str(PACKAGE).encode()).hexdigest()[:12])
#: What ``make typecheck`` left (same options: pyproject's strict, ignore_missing_imports):
#: a first run here starts from it, copied, not written into (0.4 s of CPU against 8 s
#: cold on a fresh clone, where CI runs the typecheck just before the tests).
TYPECHECKED = PACKAGE.parent / ".mypy_cache"

SNIPPET = '''
from sqlq import Queue
from sqlq.contrib.django import DjangoQueue, periodic, task
from sqlq.contrib.flask import Sqlq

q = Queue("app.db")
jobs = Sqlq()
django_queue = DjangoQueue()

@q.task
def plain(to: str) -> None: ...
@task
def django_bare(to: str) -> None: ...
@task(tube="emails")
def django_options(to: str) -> None: ...
@django_queue.task
def django_method(to: str) -> None: ...
@periodic(every=60)
def django_periodic() -> None: ...
@jobs.task
def flask_bare(to: str) -> None: ...
@jobs.task(retries=5)
def flask_options(to: str) -> None: ...
@jobs.periodic(every=60)
def flask_periodic() -> None: ...

reveal_type(plain.put("a"))
reveal_type(plain.options(delay=1).put("a"))
reveal_type(django_bare.put("a"))
reveal_type(django_options.put("a"))
reveal_type(django_method.options(delay=1).put("a"))
reveal_type(django_periodic.put())
reveal_type(flask_bare.put("a"))
reveal_type(flask_options.options(delay=1).put("a"))
reveal_type(flask_periodic.put())
django_bare.put(1)
'''


WORKFLOW = '''
import sqlq

q = sqlq.Queue("app.db")

@q.task
def count(text: str) -> int: return 0
@q.task
def total(parents: list[int], label: str) -> str: return ""

reveal_type(count.s("a"))
reveal_type(sqlq.chain(q, count.s("a"), count.s("b")))
reveal_type(sqlq.chord(q, [count.s("a")], total, "words"))
reveal_type(sqlq.chord(q, [count.s("a")], total.options(priority=1), label="words"))
count.s(1)
sqlq.chord(q, [count.s("a")], total, 7)
sqlq.chord(q, [count.s("a")], count, "x")
'''



@pytest.mark.slow
def test_task_puts_and_workflow_calls_are_typed(tmp_path: Path) -> None:
    """One mypy run over two snippets (a cold run costs 5-15 s: one, not one a test).

    Tasks: ``jid: int = f.put(...)`` passes only for a task whose put always returns an
    id; a contrib task's arguments are still checked. Workflows: ``task.s(...)`` checks
    its arguments as ``put`` does, and a chord's final task must take the parents' ids
    (a list of ints) first, then the arguments given."""
    (tmp_path / "snippet.py").write_text(SNIPPET)
    (tmp_path / "workflow.py").write_text(WORKFLOW)
    if not CACHE.exists() and TYPECHECKED.is_dir():
        shutil.copytree(TYPECHECKED, CACHE, dirs_exist_ok=True)  # another run may race us
    out, err, _ = api.run(["--strict", "--ignore-missing-imports", "--cache-dir", str(CACHE),
                           str(tmp_path / "snippet.py"), str(tmp_path / "workflow.py")])
    lines = out.splitlines()
    tasks = "\n".join(line for line in lines if "snippet.py:" in line)
    flows = "\n".join(line for line in lines if "workflow.py:" in line)

    revealed = re.findall(r'Revealed type is "([^"]+)"', tasks)
    assert revealed == ["int"] * 2 + ["int | None"] * 7, out + err
    errors = [line for line in tasks.splitlines() if ": error:" in line]
    assert len(errors) == 1 and 'Argument 1 to "put" of "Task"' in errors[0], out

    revealed = re.findall(r'Revealed type is "([^"]+)"', flows)
    assert revealed == ["sqlq.tasks.task.Signature"] + ["list[int]"] * 3, out + err
    errors = [line for line in flows.splitlines() if ": error:" in line]
    # the three bad calls, each refused (the last both as too many arguments and its type)
    assert sorted({int(line.split(":")[1]) for line in errors}) == [15, 16, 17], out
