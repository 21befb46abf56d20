"""Throughput history: puts, deletes and buries per minute over the last day.

The dashboard's live chart starts when its page opens (sqlq/dashboard/live.py). This
history is kept in the database so the overview can show the last day at once. No
job writes anything for it: the file's counters (ids handed out for puts, puts
minus live jobs for deletes, the per-tube bury totals of migration 0005/0002) are
sampled, at most once a minute, by whichever ``sqlq work`` process beats first in
that minute (:func:`sample_if_due`, from :class:`sqlq.work.presence.Presence`), and a
minute's rate is the difference of two samples.

Bounded: one row per minute, for :data:`KEEP_MINUTES` (a day, 1440 rows); each
sample deletes those older. Minutes when no worker ran have no sample: the chart
spreads the next difference over the gap. Counts are for the whole file, not per
tube (a per-tube split would need a per-tube delete counter, which the file does not
keep without a write per job).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .backends import Backend

#: Minutes of history kept (a day).
KEEP_MINUTES = 24 * 60
MINUTE_MS = 60_000


@dataclass(frozen=True)
class Minute:
    """Jobs put, deleted (or completed) and buried per minute over the interval from the
    sample before to ``at`` (ms since the epoch)."""

    at: int
    puts: float
    deletes: float
    buries: float


def sample_if_due(backend: Backend, now: int) -> bool:
    """Take this minute's sample unless one was taken; True if this call took it."""
    minute = now // MINUTE_MS
    if backend.read(lambda c: backend.store.history.throughput_sampled(c, minute)):
        return False
    from . import observe  # the dashboard's reads: not loaded with the Queue

    view = observe.overview(backend, now)
    params = {"minute": minute, "at": now, "puts": view.puts_total,
              "deletes": view.deletes_total,
              "buries": sum(t.buries_total for t in view.tubes)}
    backend.write(lambda c: backend.store.history.add_throughput(c, params, minute - KEEP_MINUTES),
                  durable=False)
    return True


def history(backend: Backend, clock: Callable[[], int],
            minutes: int = KEEP_MINUTES) -> list[Minute]:
    """The per-minute rates over the last ``minutes`` minutes, oldest first."""
    now = clock()
    rows = backend.read(lambda c: backend.store.history.list_throughput(
        c, now // MINUTE_MS - minutes))
    out = []
    for (_, t0, p0, d0, b0), (_, t1, p1, d1, b1) in zip(rows, rows[1:], strict=False):
        per = max(t1 - t0, 1) / MINUTE_MS
        out.append(Minute(t1, max(p1 - p0, 0) / per, max(d1 - d0, 0) / per,
                          max(b1 - b0, 0) / per))
    return out
