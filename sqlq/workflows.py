"""Workflows: task calls put after one another (a chain) or after a group (a chord).

Thin helpers over put's ``after=``: each puts its steps in one transaction of the
queue (all or none: a bad argument, or an ``after=`` id never issued, puts nothing),
and returns the ids. From then on the queue does the rest, with no process
watching the workflow: a step becomes ready when the jobs it waits for are gone, so a
worker that crashes mid-workflow loses nothing (the step it held is reserved again at
its TTR, as any job).

A step is a call written as its task's ``.s(...)``: ``resize.s("a.jpg")``, a
:class:`~sqlq.tasks.task.Signature`. A chord's final task gets its parents' ids as its
first argument and reads their results with :meth:`sqlq.Queue.result`; a chain
passes nothing along (docs/workflows.md says why and what to write instead).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, Concatenate, NamedTuple, ParamSpec

from .tasks.task import Signature, Task, TaskOptions

if TYPE_CHECKING:
    from .queue import Queue

P = ParamSpec("P")


class _Put(NamedTuple):
    """One put of a workflow: its step, the earlier puts (by index) it waits for, and
    whether their ids go first in its call (a chord's final step)."""

    step: Signature
    after: tuple[int, ...]
    ids_first: bool = False


def chain(q: Queue, /, *steps: Signature) -> list[int]:
    """Put ``steps`` so that each waits for the one before it; return their ids.

    One transaction: all the steps are put, or none. The first step waits only for
    what its own ``.options(after=...)`` names; each later one for the step before it
    too. A step's delay counts from the moment the step before it is gone.

    Raises:
        JobNotFound: an id a step's options name in ``after`` was never issued.
        TypeError: a step is not a ``task.s(...)``, or its arguments do not fit its
            function or JSON (nothing is put).

    Examples:
        >>> sqlq.chain(q, fetch.s("https://example.com"), parse.s(), store.s())
        [1, 2, 3]
    """
    plan = [_Put(step, (i - 1,) if i else ()) for i, step in enumerate(_steps(steps))]
    return _put(q, plan)


def chord(q: Queue, steps: Iterable[Signature], then: Task[Concatenate[list[int], P], Any, Any]
          | TaskOptions[Concatenate[list[int], P], Any], /, *args: P.args,
          **kwargs: P.kwargs) -> list[int]:
    """Put ``steps`` (a group, run in any order, in parallel), and a call of ``then``
    that waits for all of them; return the steps' ids, then the final job's id last.

    ``then`` is called with the steps' ids (a list, in the steps' order) first, then
    ``args`` and ``kwargs``: it reads each step's result with ``q.result(id)``. One
    transaction: everything is put, or nothing.

    Raises:
        JobNotFound: an id a step's options name in ``after`` was never issued.
        TypeError: a step is not a ``task.s(...)``, or a call's arguments do not fit
            its function or JSON (nothing is put).

    Examples:
        >>> *parts, final = sqlq.chord(q, [count.s(url) for url in urls], total, "words")
        >>> q.result(final, timeout=60)   # total([ids of the counts], "words")
        b'1234'
    """
    group = _steps(steps)
    options = then if isinstance(then, TaskOptions) else then.options()
    final = Signature(options, args, kwargs)
    final.message([])  # its arguments checked before anything is put
    plan = [_Put(step, ()) for step in group]
    plan.append(_Put(final, tuple(range(len(group))), ids_first=True))
    return _put(q, plan)


def _steps(steps: Iterable[Signature]) -> list[Signature]:
    """The steps as a list, each a Signature (a task without ``.s(...)`` is named)."""
    if isinstance(steps, Signature):
        raise TypeError("steps must be an iterable of task.s(...) calls, not one call")
    found = list(steps)
    for i, step in enumerate(found):
        if not isinstance(step, Signature):
            hint = " (write task.s(...))" if isinstance(step, (Task, TaskOptions)) else ""
            raise TypeError(f"step {i} must be a task.s(...) call, not "
                            f"{type(step).__name__}{hint}")
    return found


def _put(q: Queue, plan: list[_Put]) -> list[int]:
    """Put the plan's steps in order in one transaction of q; their ids."""
    from .queue import Queue

    if not isinstance(q, Queue):
        raise TypeError(f"the first argument must be a sqlq.Queue, not {type(q).__name__}")
    bodies = [None if p.ids_first else p.step.message() for p in plan]  # checked first
    ids: list[int] = []
    with q.transaction():  # inside an open one (this thread's), a savepoint of it
        for put, body in zip(plan, bodies, strict=True):
            parents = [ids[i] for i in put.after]
            o = put.step.options
            ids.append(q.put(put.step.message(parents) if body is None else body,
                             tube=o.tube, priority=o.priority, delay=o.delay, ttr=o.ttr,
                             unique_key=o.unique_key, after=(*o.after, *parents) or None,
                             on_conflict=o.on_conflict, group=o.group))
    return ids
