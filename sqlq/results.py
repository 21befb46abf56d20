"""Job results: ``complete`` stores one, ``result`` waits for it.

A result lives in ``sqlq_results`` from the commit that deletes its job until
``expires_at``. Because the delete and the insert are one transaction, a reader
sees, for any job id, exactly one of: the job (still pending, or buried), its
result, or nothing (never issued, expired, or deleted without a result). That
is what lets :func:`wait` decide from one snapshot, and sleep on the same
notifier as ``reserve`` in between.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import apsw

from . import store
from .errors import JobBuried, JobNotFound, Timeout
from .model import BURIED, check_body, check_job_id

if TYPE_CHECKING:
    from .queue import Queue

#: One read's verdict: the result bytes, or None while the job is still pending.
_Outcome = tuple[bool, bytes | None]


def complete(queue: Queue, job_id: int, result: bytes | str, lease: int | None) -> str:
    """Delete the job and store its result, in one durable transaction (see Queue.complete);
    return the job's tube."""
    check_job_id(job_id)
    data = check_body(result, queue.max_job_size, "result")
    ttl_ms = queue.result_ttl_ms
    clock = queue._clock

    def write(c: apsw.Connection) -> str:
        now = clock()
        return store.complete(c, now, job_id, lease, data, now + ttl_ms)

    return queue._db.write(write)


def _look(queue: Queue, job_id: int) -> _Outcome:
    """(another connection committed since the last look, the result or None if pending).

    Raises JobBuried or JobNotFound when the job will never have a result.
    """
    def read(c: apsw.Connection) -> tuple[bool, tuple[bytes | None, int | None, str | None], int]:
        now = queue._clock()
        outcome = store.result_outcome(c, now, job_id)
        issued = store.total_jobs(c) if outcome == (None, None, None) else job_id
        return queue._note_data_version(c), outcome, issued

    changed, (result, state, reason), issued = queue._db.read(read)
    if result is not None:
        return changed, result
    if state == BURIED:
        raise JobBuried(f"job {job_id} was buried" + (f": {reason}" if reason else ""),
                        job_id=job_id, reason=reason)
    if state is None:
        if job_id > issued:
            raise JobNotFound(f"job {job_id} not found (that id was never issued)")
        raise JobNotFound(f"job {job_id} has no result (expired, or deleted without one)")
    return changed, None


def wait(queue: Queue, job_id: int, timeout: float | None) -> bytes:
    """Block until job_id has a result and return it (see Queue.result)."""
    from .queue import _timeout_deadline

    check_job_id(job_id)
    deadline = _timeout_deadline(timeout)
    _, found = _look(queue, job_id)
    if found is None and timeout != 0:
        found = queue._wait(lambda events: _look(queue, job_id), deadline)
    if found is None:
        raise Timeout(f"job {job_id}: no result within {timeout:g} s")
    return found


__all__ = ["complete", "wait"]
