"""``sqlq copy SRC DST``: move a queue between databases, from a SQLite file to a
PostgreSQL database (the day one machine is not enough) and back.

Everything a user's jobs depend on moves: every job with its state, priority,
delay, counters, bury reason and unique key; pauses; unexpired results;
subscriptions; periodic slots; and the id counter, so no id is ever issued twice.
A reserved job is copied as ready: its holder works on the source and cannot
acknowledge it in the target (stop the workers first). The target must be new or
empty, and is written in one transaction: a failed copy leaves it as it was.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from .backends import Backend, exists, identity, open_backend
from .core.durations import now_ms
from .errors import Error
from .model import OnProgress
from .verbs import operations

#: Jobs read and written per round trip (bodies are up to the max job size each).
PAGE = 500


@dataclass
class CopyReport:
    """What was copied, kind by kind (``job``, ``tube``, ``result`` ...), and the id
    counter the target goes on from."""

    counts: dict[str, int] = field(default_factory=dict)
    total_jobs: int = 0


def copy(source: str, target: str, *, clock: Callable[[], int] = now_ms,
         progress: OnProgress | None = None) -> CopyReport:
    """Copy every live job and all queue state from ``source`` to ``target``;
    ``progress(jobs copied, fraction)`` after each page of jobs (sqlq/model.py).

    Raises:
        Error: the source does not exist, or the target already holds anything.
    """
    if not exists(source):
        raise Error(f"no database at {source}")
    if identity(source) == identity(target):
        raise Error(f"{source}: the source and the target are the same database")
    src = open_backend(source, clock=clock)
    try:
        dst = open_backend(target, clock=clock)
        try:
            return copy_between(src, dst, progress)
        finally:
            dst.close()
    finally:
        src.close()


def copy_between(src: Backend, dst: Backend, progress: OnProgress | None = None
                 ) -> CopyReport:
    """Copy everything from one open backend to another (``sqlq copy``, and ``sqlq
    backup`` of a PostgreSQL queue into a new file), in one transaction on each side
    (``verbs.operations.copy_between``)."""
    copied = operations.copy_between(src, dst, PAGE, progress)
    if copied is None:
        raise Error(f"{dst.location} already holds jobs or queue state; sqlq copy writes "
                    "only to a new or empty database")
    counts, total_jobs = copied
    return CopyReport(counts, total_jobs)
