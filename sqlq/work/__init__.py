"""``sqlq work`` and ``@q.task``: the worker side, from a decorated function to N processes.

``sqlq work`` (``cli/work.py``) calls :func:`run`, which becomes a :class:`Supervisor`; each
of its children (``python -m sqlq work --in-process``) runs one :class:`Worker` loop,
which hands every job it reserves to a runner: a :class:`TaskRunner` or a
:class:`ShellRunner`.

===================  ===========================================================================
``command.py``       ``run()``: a supervisor, or with ``--in-process`` one worker's set-up
``config.py``        ``WorkConfig``: what ``sqlq work`` was told, each child's command line
``supervisor.py``    ``Supervisor``: N worker processes, restarted when they die, stopped together
``worker.py``        ``Worker``, the loop: reserve, run, then delete, release with a delay, or bury
``aworker.py``       ``AsyncWorker``: ``async def`` tasks, ``--concurrency`` at once, one loop
``handling.py``      ``JobHandling``: claims, acknowledgements, outcomes and their log lines (both)
``heartbeat.py``     the policy while a job runs: touch at 80% of the TTR, stop or report at the
                     TTR, the grace period; the timing constants
``watchdog.py``      the thread that heartbeats and keeps the grace period while a task runs
``prefetch.py``      ``--prefetch``: jobs per claim (adapted to run times), the batch a worker holds
``runner.py``        what the loop asks of a way to run jobs: ``Runner``, ``Running``, ``Outcome``
``taskrun.py``       ``TaskRunner``: a task's job decoded, its function found and called
``scheduler.py``     ``Scheduler``: the thread that puts each periodic slot's job once
``shell.py``         ``ShellRunner``: ``-- COMMAND``, one child process per job, killed at the TTR
``recorder.py``      ``Recorder``: the waits and runs for /metrics' histograms, flushed every 10 s
``presence.py``      ``Presence``: this process's row in the workers registry, written every 5 s
``horizon.py``       ``HorizonWatch``: what holds back cleanup, looked at every 30 s, warnings
``logs.py``          the log lines of ``sqlq work``: text, or one JSON object per line
===================  ===========================================================================

The names below are imported on first use, not with the package: an application
that only declares tasks loads ``sqlq/tasks/`` (its ``Task``, ``RetryPolicy`` and
``Schedule`` are named here too), not the worker, its threads and its subprocesses.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..tasks.periodic import Schedule
    from ..tasks.retry import Backoff, RetryPolicy
    from ..tasks.task import REGISTRY, Task
    from .command import run
    from .config import WorkConfig
    from .shell import ShellRunner
    from .supervisor import Supervisor
    from .taskrun import TaskRunner
    from .worker import Worker

_LAZY = {"WorkConfig": ".config", "run": ".command", "Schedule": "..tasks.periodic",
         "Backoff": "..tasks.retry", "RetryPolicy": "..tasks.retry", "ShellRunner": ".shell",
         "Supervisor": ".supervisor", "REGISTRY": "..tasks.task", "Task": "..tasks.task",
         "TaskRunner": ".taskrun", "Worker": ".worker"}


def __getattr__(name: str) -> Any:
    """Import the module that defines ``name`` (see the module docstring)."""
    if name in _LAZY:
        import importlib

        value = getattr(importlib.import_module(_LAZY[name], __name__), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["REGISTRY", "Backoff", "RetryPolicy", "Schedule", "ShellRunner", "Supervisor", "Task",
           "TaskRunner", "WorkConfig", "Worker", "run"]
