"""Failed jobs across all tubes, grouped by how they failed: the dashboard's Failed page.

A buried job failed for a reason: its newest kept attempt's ``error`` (the exception's
type, a command's exit status; see :mod:`sqlq.attempts`) and ``location`` (where a
task's exception was raised: the innermost frame of the project's code), and its
``bury_reason`` (the attempt's one-line message when a worker buried it; whatever a
caller gave ``bury(reason=)``). As Sentry-like tools do, jobs whose failure has a
location are grouped by error and location, whatever their messages (``KeyError:
'bob'`` and ``KeyError: 'carol'`` from one line are one bug, retried with one click),
the messages listed inside; the others (a command's exit, a caller's bury, a run stopped
at its TTR) by error and reason. A :class:`FailedGroup` shows "412 jobs: KeyError at
app/tasks.py:41" once, not 412 rows, and is retried (kicked) or deleted as a whole.

Bounded: only the newest :data:`DEPTH` buried jobs are grouped, read from the buried
index (a walk of the buried jobs, never of the whole table), each with a probe of its
newest attempt; a reason counts by its first :data:`~sqlq.model.MESSAGE_LIMIT`
characters (reasons are capped to that when buried), so a group's key stays small.
"""

from __future__ import annotations

from dataclasses import dataclass, field

#: The newest buried jobs grouped (and acted on by a group's retry or delete).
DEPTH = 10_000
#: Groups on one page, at most.
MAX_PAGE = 500
#: Distinct messages listed in a group, at most (the most frequent).
MESSAGES = 10


@dataclass(frozen=True)
class FailedGroup:
    """Buried jobs that failed the same way.

    Attributes:
        error: the newest kept attempt's error (``KeyError``, ``exit status 3``,
            ``timed out``), or ``""`` for a job buried without one (by a caller, or
            by a worker that did not run it).
        reason: the bury reason of the group's newest job: an example of its messages
            (``""`` if none was given).
        jobs: how many buried jobs are in the group.
        newest_id: the most recent of them (groups are ordered by it, newest first).
        tubes: the tubes they are in, sorted.
        location: where the error was raised (``app/tasks.py:41 in lookup``,
            :func:`sqlq.attempts.raised_at`); ``""``: the group is its reason's alone.
        messages: its distinct bury reasons with their job counts, the most frequent
            first, :data:`MESSAGES` at most.
        distinct: how many distinct reasons it has (``len(messages)`` unless more).
    """

    error: str
    reason: str
    jobs: int
    newest_id: int
    tubes: list[str]
    location: str = ""
    messages: list[tuple[str, int]] = field(default_factory=list)
    distinct: int = 1

    @property
    def key(self) -> tuple[str, str, str]:
        """(error, reason, location) naming the group for
        :meth:`sqlq.Queue.failed_group_jobs`: the reason is ``""`` when a location names it."""
        return self.error, "" if self.location else self.reason, self.location


def check_page(limit: int, offset: int) -> None:
    """A page of groups: ``limit`` 1 to :data:`MAX_PAGE` from ``offset`` (>= 0)."""
    if not 1 <= limit <= MAX_PAGE:
        raise ValueError(f"limit must be 1..{MAX_PAGE}, not {limit}")
    if offset < 0:
        raise ValueError(f"offset must be >= 0, not {offset}")


def fold(rows: list[tuple[str, str, str, int, int, str]], limit: int,
         offset: int) -> list[FailedGroup]:
    """A page of groups, newest first, from ``HistoryStore.failed_groups``' rows: one row
    per (error, location, reason); a location merges its reasons into one group."""
    folded: dict[tuple[str, str, str], list[tuple[str, int, int, str]]] = {}
    for error, location, reason, jobs, newest, tubes in rows:
        key = (error, location, "" if location else reason)
        folded.setdefault(key, []).append((reason, jobs, newest, tubes))
    found = [_group(error, location, parts) for (error, location, _), parts in folded.items()]
    found.sort(key=lambda g: g.newest_id, reverse=True)
    return found[offset:offset + limit]


def _group(error: str, location: str, parts: list[tuple[str, int, int, str]]) -> FailedGroup:
    """One group from its (reason, jobs, newest id, tubes) rows."""
    newest = max(parts, key=lambda p: p[2])
    by_count = sorted(parts, key=lambda p: (-p[1], -p[2]))
    tubes = sorted({t for p in parts for t in p[3].split(",")})
    return FailedGroup(error, newest[0], sum(p[1] for p in parts), newest[2], tubes, location,
                       [(p[0], p[1]) for p in by_count[:MESSAGES]], len(parts))
