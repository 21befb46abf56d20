"""Job results: ``Verbs.complete`` stores one, ``Operations.look_result`` reads what
became of a job (:func:`decide`).

A result lives in the results table from the commit that deletes its job until
``expires_at``. Because the delete and the insert are one transaction, a reader
sees, for any job id, exactly one of: the job (still pending, or buried), its
result, or nothing (never issued, expired, or deleted without a result). That is
what lets :func:`decide` decide from one snapshot, and ``Queue.result`` sleep on
the same notifier as ``reserve`` in between.
"""

from __future__ import annotations

from .errors import JobBuried, JobNotFound
from .model import BURIED


def decide(job_id: int, outcome: tuple[bytes | None, int | None, str | None],
           issued: int) -> bytes | None:
    """The job's result from what one snapshot held (``ResultStore.look``: the outcome
    and the ids issued), or None while it is pending.

    Raises JobBuried or JobNotFound when the job will never have a result.
    """
    result, state, reason = outcome
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


__all__ = ["decide"]
