"""Job results: ``Verbs.complete`` stores one, :func:`look` reads what became of a job.

A result lives in the results table from the commit that deletes its job until
``expires_at``. Because the delete and the insert are one transaction, a reader
sees, for any job id, exactly one of: the job (still pending, or buried), its
result, or nothing (never issued, expired, or deleted without a result). That is
what lets :func:`look` decide from one snapshot, and ``Queue.result`` sleep on
the same notifier as ``reserve`` in between.
"""

from __future__ import annotations

from collections.abc import Callable

from .backends import Backend
from .backends.base import Conn
from .errors import JobBuried, JobNotFound
from .model import BURIED


def look(backend: Backend, clock: Callable[[], int], job_id: int) -> bytes | None:
    """The job's result, or None while it is pending.

    Raises JobBuried or JobNotFound when the job will never have a result.
    """
    store = backend.store

    def read(c: Conn) -> tuple[tuple[bytes | None, int | None, str | None], int]:
        outcome = store.results.result_outcome(c, clock(), job_id)
        issued = store.jobs.total_jobs(c) if outcome == (None, None, None) else job_id
        return outcome, issued

    (result, state, reason), issued = backend.read(read)
    if result is not None:
        return result
    if state == BURIED:
        raise JobBuried(f"job {job_id} was buried" + (f": {reason}" if reason else ""),
                        job_id=job_id, reason=reason)
    if state is None:
        if job_id > issued:
            raise JobNotFound(f"job {job_id} not found (that id was never issued)")
        raise JobNotFound(f"job {job_id} has no result (expired, or deleted without one)")
    return None


__all__ = ["look"]
