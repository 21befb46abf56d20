"""The worker's side of ``@q.task``: :class:`TaskRunner` decodes a job's body (the JSON
call of ``tasks/task.py``), finds the task in the registry and calls it, in the worker's
main thread while the worker's watchdog thread heartbeats and keeps the grace period
(see watchdog.py), or on the async worker's loop (aworker.py).
"""

from __future__ import annotations

import contextvars
import inspect
import json
import traceback
from collections.abc import Awaitable
from typing import TYPE_CHECKING, Any, TypeVar

from .. import control
from ..attempts import error_name, format_traceback, raised_at
from ..tasks.task import REGISTRY, Task, decode_call
from . import runner

if TYPE_CHECKING:
    from ..model import Job
    from ..tasks.retry import RetryPolicy

T = TypeVar("T")


def _last_line(exc: BaseException) -> str:
    """The traceback's last line (``ValueError: bad input``): the bury reason."""
    lines = traceback.format_exception_only(type(exc), exc)
    text = "".join(lines).strip().splitlines()
    return text[-1] if text else type(exc).__name__


def _failed(exc: BaseException, policy: RetryPolicy) -> runner.Outcome:
    """A task's exception as a failure: its last line (the bury reason), its type, its
    traceback from the task's own frame (the worker's call into it left out), and where
    in the project's code it was raised."""
    return runner.failed(_last_line(exc), policy, error=error_name(exc),
                         traceback=format_traceback(exc, skip=1), location=raised_at(exc))


class TaskRun:
    """A task call, run in the caller's thread when the worker waits for it (see watchdog.py),
    or awaited on the async worker's loop (:meth:`run_async`, see aworker.py)."""

    inline = True

    def __init__(self, task: Task[Any, Any, Any], args: list[Any], kwargs: dict[str, Any],
                 job: Job) -> None:
        self.task = task
        self.name = task.name
        self.keepalive = task.keepalive
        self.timeout = task.timeout
        self.is_async = task.is_async
        self._call = (args, kwargs)
        self._job = job

    def wait(self, timeout: float) -> runner.Outcome | None:
        args, kwargs = self._call
        token = control.CURRENT.set(self._job)  # sqlq.current_job(); not a `with`: per job
        try:
            value = self.task.fn(*args, **kwargs)
            if value is not None and inspect.isawaitable(value):  # an async task, run here
                import asyncio  # here: a worker of plain functions never loads it (25 ms)

                value = asyncio.run(_awaited(value))
        except Exception as exc:  # noqa: BLE001 - a task's failure is data, not our crash
            return _failed(exc, self.task.policy)
        finally:
            control.CURRENT.reset(token)
        return self._outcome(value)

    async def run_async(self) -> runner.Outcome:
        """Await an ``async def`` task (a plain function runs in a thread meanwhile)."""
        args, kwargs = self._call
        try:
            with control.running(self._job):  # sqlq.current_job(), here and in the thread
                if self.is_async:
                    value = await self.task.fn(*args, **kwargs)
                else:
                    # In this task's context, as asyncio.to_thread: the run's span (tracing)
                    # and the application's context variables reach the function.
                    import asyncio  # loaded already: this runs in the async worker's loop

                    context = contextvars.copy_context()
                    value = await asyncio.get_running_loop().run_in_executor(
                        None, lambda: context.run(self.task.fn, *args, **kwargs))
        except Exception as exc:  # noqa: BLE001 - a task's failure is data, not our crash
            return _failed(exc, self.task.policy)
        return self._outcome(value)

    def _outcome(self, value: Any) -> runner.Outcome:
        if value is None:
            return runner.DONE  # nothing to store: the worker's one-commit fast path
        try:
            return runner.done(json.dumps(value, allow_nan=False).encode())
        except (TypeError, ValueError) as exc:
            return runner.bury(f"the return value cannot be stored as JSON: {exc}",
                               error=error_name(exc))

    def kill(self, reason: str) -> runner.Outcome | None:
        return None  # a Python call cannot be stopped from outside


async def _awaited(value: Awaitable[T]) -> T:
    return await value


class TaskRunner:
    """Runs task calls by name from the registry, one at a time, in the worker's thread."""

    def __init__(self, registry: dict[str, Task[Any, Any, Any]] | None = None) -> None:
        self.registry = REGISTRY if registry is None else registry

    def start(self, job: Job) -> runner.Running | runner.Finished:
        try:
            name, args, kwargs = decode_call(job.body)
        except ValueError as exc:
            return runner.Finished(runner.bury(str(exc)))
        task = self.registry.get(name)
        if task is None:
            return runner.Finished(runner.bury(f"unknown task {name!r} (not imported by this "
                                               "worker: check --import)"), name=name)
        given_up = runner.exhausted(job, task.policy)
        if given_up is not None:
            return runner.Finished(given_up, name=name)
        error = task.bind_error(args, kwargs)
        if error is not None:
            return runner.Finished(runner.bury(f"bad arguments: {error}"), name=name)
        return TaskRun(task, args, kwargs, job)

    def close(self) -> None:
        """Nothing held between jobs."""
