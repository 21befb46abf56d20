"""Control of running jobs: cancel, progress, and the job a task is running (issue 25).

* cancel (``Queue.cancel``, the verb ``Verbs.cancel``): a job that is not reserved is
  deleted, as ``Queue.delete`` deletes it (a waiting job's edges, a parent's children
  released).
  A reserved one is deleted too, at once, so that nothing (no claim, no reaper of
  expired leases, no release of a dead worker's jobs) can hand it out again, and its
  (id, lease) is remembered in ``sqlq_cancelled``: its holder's next verb under that
  lease finds no row, as for any lost lease, and only then reads why, to raise
  :class:`~sqlq.JobCancelled` instead of :class:`~sqlq.JobLost`. The hot path (put,
  claim, delete) reads nothing more.
* progress (``Job.progress``, the verb ``Verbs.progress``): a small UPDATE of the job's
  row under its lease; ``Operations.read_progress`` for ``result(on_progress=)`` (stats_job, ``sqlq
  peek`` and the dashboard read it with the rest of the job).
* :func:`current_job`: the job ``sqlq work`` is running in this thread or task, which
  raises JobCancelled once the worker learned that it was cancelled (a plain function
  cannot be interrupted: Python cannot kill a thread; it can only look).
"""

from __future__ import annotations

import contextlib
import contextvars
import math
from collections.abc import Iterator
from typing import TYPE_CHECKING

from .errors import JobCancelled, Timeout

if TYPE_CHECKING:
    from .model import Job

#: A cancelled reservation is remembered this long after its lease would have ended
#: (ms), so that a holder still running then is told "cancelled", not just "lost".
KEEP_CANCELLED_MS = 3_600_000
#: The longest progress message (characters): a line for a progress bar, not a log.
MAX_MESSAGE = 1024

#: A progress value as ``stats_job`` shows it: a fraction 0-1, a count, or none yet.
Progress = int | float | None


def check_progress(value: object, message: object) -> tuple[str, str | None]:
    """The stored form of ``Job.progress(value, message)``: (value as JSON, message).

    A float is a fraction of the work, 0 to 1; an int a count of things done (>= 0).
    """
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError(f"value must be a float 0-1 or an int count, not {type(value).__name__}")
    if isinstance(value, int):
        if value < 0:
            raise ValueError(f"value must be >= 0 as a count, not {value}")
        text = str(value)
    else:
        if not math.isfinite(value) or not 0.0 <= value <= 1.0:
            raise ValueError(f"value must be between 0 and 1 as a fraction, not {value!r}")
        text = repr(float(value))
    if message is not None:
        if not isinstance(message, str):
            raise TypeError(f"message must be a str or None, not {type(message).__name__}")
        if len(message) > MAX_MESSAGE:
            raise ValueError(f"message must be at most {MAX_MESSAGE} characters, "
                             f"not {len(message)}")
    return text, message


def decode_progress(text: str | None) -> Progress:
    """A stored progress value back as the int or float it was given as."""
    if text is None:
        return None
    import json

    value = json.loads(text)
    return value if isinstance(value, int | float) else None


def check_callback(callback: object) -> None:
    """``result(on_progress=)``: a callable or None."""
    if callback is not None and not callable(callback):
        raise TypeError(f"on_progress must be callable or None, not {type(callback).__name__}")


# -- the job a task is running -----------------------------------------------------------------

#: The job ``sqlq work`` runs in this context (set by its TaskRun): :func:`current_job`.
CURRENT: contextvars.ContextVar[Job | None] = contextvars.ContextVar("sqlq_job", default=None)
#: Ids of the jobs this process's worker learned were cancelled.
_CANCELLED: set[int] = set()
#: Running jobs past their task's timeout: id -> the timeout (seconds).
_TIMED_OUT: dict[int, float] = {}


def current_job() -> Job | None:
    """The job ``sqlq work`` is running in this thread or asyncio task (None elsewhere).

    A long task calls it from time to time: once its worker has learned (within about
    a second) that the job was cancelled, it raises :class:`~sqlq.JobCancelled`
    instead, and the task stops by letting it propagate. Python cannot interrupt a
    function that does not look: an ``async def`` task is cancelled at its next
    ``await`` and a COMMAND is killed, but a plain function runs until it calls this,
    ``job.touch()`` or ``job.progress()``, or returns.

    The same look stops a plain function that outlived its task's ``timeout=``.

    Raises:
        JobCancelled: the running job was cancelled.
        Timeout: the running job outlived its task's ``timeout`` (``@q.task``).
    """
    job = CURRENT.get()
    if job is not None:
        if job.id in _CANCELLED:
            raise JobCancelled(f"job {job.id} was cancelled", job_ids=(job.id,))
        if job.id in _TIMED_OUT:
            raise Timeout(f"job {job.id}: still running after its timeout of "
                          f"{_TIMED_OUT[job.id]:g}s")
    return job


@contextlib.contextmanager
def running(job: Job) -> Iterator[None]:
    """The worker runs ``job`` in this context: :func:`current_job` returns it."""
    token = CURRENT.set(job)
    try:
        yield
    finally:
        CURRENT.reset(token)


def mark_cancelled(job_id: int) -> None:
    """The worker learned that its job ``job_id`` was cancelled."""
    _CANCELLED.add(job_id)


def mark_timed_out(job_id: int, seconds: float) -> None:
    """The worker's running job ``job_id`` outlived its task's ``timeout``."""
    _TIMED_OUT[job_id] = seconds


def was_cancelled(job_id: int) -> bool:
    """Whether the worker marked its job ``job_id`` cancelled."""
    return job_id in _CANCELLED


def forget(job_id: int) -> None:
    """The worker is done with ``job_id``: drop its marks."""
    _CANCELLED.discard(job_id)
    _TIMED_OUT.pop(job_id, None)
