"""The one error tree of sqlq.

Every error a user can meet derives from :class:`Error`, so ``except sqlq.Error``
catches them all. Each class's docstring is its default message, so raising the
bare class still says something useful (an idea taken from procrastinate).
"""

from __future__ import annotations

from collections.abc import Sequence


class Error(Exception):
    """sqlq error."""

    def __init__(self, message: str | None = None) -> None:
        super().__init__(message or (self.__doc__ or "").strip().splitlines()[0])


class JobNotFound(Error):
    """No such job (or not in a state that allows this operation)."""


class JobLost(Error):
    """The job's lease was lost: its TTR ran out or it was reserved again.

    ``job_ids`` names the jobs whose lease was lost (one, or several after
    ``delete_many`` or ``reserve_many(delete=...)``; empty when raised bare).
    ``cut_off`` is true when the acknowledgement was cut off by a lost connection and
    made once more: its first attempt may have committed, so a job it finds gone may
    well have been removed by it (done, not lost). A delete settles that itself from the
    job's finished record (``Queue.finished``: outcome ``done``, ``attempts`` equal to
    the handle's ``reserves``) and raises nothing when the record says so.
    """

    def __init__(self, message: str | None = None, *, job_ids: Sequence[int] = (),
                 cut_off: bool = False) -> None:
        super().__init__(message)
        self.job_ids: tuple[int, ...] = tuple(job_ids)
        self.cut_off = cut_off


class JobCancelled(JobLost):
    """The job was cancelled while reserved: it will not run again.

    Raised to its holder (``touch``, ``delete``, ``release``, ``bury``, ``complete``,
    ``progress``, and ``sqlq.current_job()`` in a task that ``sqlq work`` runs) once
    ``Queue.cancel`` took it. A :class:`JobLost`: the reservation is gone, and the
    job with it (``job_ids`` names it).
    """


class JobTooBig(Error):
    """The job body is larger than the maximum job size."""


class JobBuried(Error):
    """The job was buried instead of completing."""

    def __init__(self, message: str | None = None, *, job_id: int | None = None,
                 reason: str | None = None) -> None:
        super().__init__(message)
        self.job_id = job_id
        self.reason = reason


class Timeout(Error, TimeoutError):
    """Timed out.

    Also the builtin ``TimeoutError``, so ``except TimeoutError`` catches it too.
    """


class InvalidTube(Error, ValueError):
    """Invalid tube name."""


class SchemaError(Error):
    """The database file is not a sqlq database this version can use."""


class DatabaseError(Error):
    """The database could not be read or written."""


class Disconnected(DatabaseError):
    """The connection to the database server was lost, or none could be made.

    What was in flight may or may not have committed. sqlq makes the connection
    again on the next call; a blocked ``reserve`` or ``result`` and ``sqlq work`` do
    so by themselves and go on.
    """


class Locked(DatabaseError):
    """Another process held the database's write lock for longer than this write would wait."""
