"""Failed jobs across all tubes, grouped by error: the dashboard's Failed page.

A buried job failed for a reason: its newest kept attempt's ``error`` (the exception's
type, a command's exit status; see :mod:`sqlq.attempts`) and its ``bury_reason`` (the
attempt's one-line message when a worker buried it; whatever a caller gave
``bury(reason=)``). Jobs with the same pair form a :class:`FailedGroup`, so an
operator sees "412 jobs: KeyError 'sku'" once, not 412 rows, and retries (kicks) or
deletes them together.

Bounded: only the newest :data:`DEPTH` buried jobs are grouped, read from the buried
index (a walk of the buried jobs, never of the whole table), each with one probe of
its newest attempt.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .backends import Backend

#: The newest buried jobs grouped (and acted on by a group's retry or delete).
DEPTH = 10_000
#: Groups on one page, at most.
MAX_PAGE = 500


@dataclass(frozen=True)
class FailedGroup:
    """Buried jobs that failed the same way.

    Attributes:
        error: the newest kept attempt's error (``KeyError``, ``exit status 3``,
            ``timed out``), or ``""`` for a job buried without one (by a caller, or
            by a worker that did not run it).
        reason: the bury reason (``""`` if none was given).
        jobs: how many buried jobs are in the group.
        newest_id: the most recent of them (groups are ordered by it, newest first).
        tubes: the tubes they are in, sorted.
    """

    error: str
    reason: str
    jobs: int
    newest_id: int
    tubes: list[str]


def groups(backend: Backend, limit: int = 50, offset: int = 0) -> list[FailedGroup]:
    """A page of the groups of the newest :data:`DEPTH` buried jobs, newest first."""
    if not 1 <= limit <= MAX_PAGE:
        raise ValueError(f"limit must be 1..{MAX_PAGE}, not {limit}")
    if offset < 0:
        raise ValueError(f"offset must be >= 0, not {offset}")
    rows = backend.read(lambda c: backend.store.failed_groups(c, DEPTH, limit, offset))
    return [FailedGroup(error, reason, jobs, newest, sorted(tubes.split(",")))
            for error, reason, jobs, newest, tubes in rows]


def group_ids(backend: Backend, error: str, reason: str) -> list[tuple[int, str]]:
    """(id, tube) of the buried jobs of the group (error, reason), oldest first."""
    return backend.read(lambda c: backend.store.failed_group_ids(c, DEPTH, error, reason))

