"""Histograms of how long jobs wait before they are reserved and how long they run.

Only ``sqlq work`` knows both moments, so its workers observe them, in memory
(:class:`Tally`: a few additions per job, no I/O), and add what they saw to the
database now and then (:meth:`sqlq.Queue.record_durations`: one short write
transaction every :data:`FLUSH_EVERY` seconds at most, and at exit). The database
keeps, per tube, metric and bucket, the number of observations and their sum,
*not* cumulated: a flush adds only to the buckets it saw, and the totals are those
of every worker process that ever flushed. :meth:`sqlq.Queue.duration_histograms`
reads them back cumulated, as Prometheus wants them (``/metrics``).

The two metrics:

* ``wait``: from the moment a job became ready (its put, or the end of the delay it
  was put with) to its first reservation. Later reservations (after a release, a
  timeout or a kick) are not counted: the moment such a job became ready again is
  not stored, and recording it would cost those verbs a write.
* ``run``: from the start of a run to its outcome (done, failed and retried or
  buried, or finished after its reservation was lost), as the worker timed it.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable
from dataclasses import dataclass

from .model import Job

#: The buckets' upper bounds (seconds; each bucket counts values <= its bound, as
#: Prometheus' ``le``), then +Inf. Fixed: every process adds to the same rows.
BUCKETS: tuple[float, ...] = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
                              30.0, 60.0, 120.0, 300.0, 600.0, 1800.0, 3600.0, float("inf"))
METRICS = ("wait", "run")
#: Seconds a worker keeps observations in memory before adding them to the database.
FLUSH_EVERY = 10.0


def le_label(bound: float) -> str:
    """A bound as Prometheus writes it (``0.005``, ``1.0``, ``+Inf``): the key of its row."""
    return "+Inf" if bound == float("inf") else repr(float(bound))


LABELS = tuple(le_label(b) for b in BUCKETS)

#: A row of the database's table: (tube, metric, le, count, sum of seconds).
BucketRow = tuple[str, str, str, int, float]


class Tally:
    """Observations not yet added to the database, per (tube, metric): per bucket, how
    many and their sum. Not thread-safe: one per worker loop."""

    __slots__ = ("_cells",)

    def __init__(self) -> None:
        self._cells: dict[tuple[str, str], tuple[list[int], list[float]]] = {}

    def observe(self, tube: str, metric: str, seconds: float) -> None:
        cell = self._cells.get((tube, metric))
        if cell is None:
            if metric not in METRICS:
                raise ValueError(f"metric must be one of {', '.join(METRICS)}, not {metric!r}")
            cell = self._cells[tube, metric] = ([0] * len(BUCKETS), [0.0] * len(BUCKETS))
        if seconds < 0.0:  # max(seconds, 0.0) without the call: once or twice per job
            seconds = 0.0
        i = bisect.bisect_left(BUCKETS, seconds)
        cell[0][i] += 1
        cell[1][i] += seconds

    def reserved(self, job: Job) -> None:
        """Observe the wait of a job just reserved, when it is its first reservation.

        The claim's own clock is ``reserved_until - ttr``; the job became ready at its
        put, or at the end of the delay it was put with (``delay``). A kicked job
        became ready when kicked, which is not stored: it is not counted.
        """
        if job.reserves != 1 or job.kicks or job.reserved_until is None:
            return
        claimed = job.reserved_until - round(job.ttr * 1000)
        ready = job.created_at + round(job.delay * 1000)
        self.observe(job.tube, "wait", (claimed - ready) / 1000)

    def ran(self, job: Job, seconds: float) -> None:
        """Observe a run of ``job`` that lasted ``seconds``."""
        self.observe(job.tube, "run", seconds)

    def rows(self) -> list[BucketRow]:
        """The non-empty buckets, in key order (every flush locks rows in one order)."""
        found = [(tube, metric, LABELS[i], n, sums[i])
                 for (tube, metric), (counts, sums) in self._cells.items()
                 for i, n in enumerate(counts) if n]
        return sorted(found)

    def clear(self) -> None:
        self._cells.clear()

    def __bool__(self) -> bool:
        return bool(self._cells)


@dataclass(frozen=True)
class Histogram:
    """One tube's histogram of one metric, as Prometheus exports it."""

    tube: str
    metric: str  # "wait" or "run"
    buckets: list[tuple[str, int]]  # (le, observations <= le), every bound of BUCKETS
    count: int
    sum: float  # seconds

    def quantile_bound(self, q: float) -> float | None:
        """The smallest bucket bound at or below which a fraction q of the observations
        fall (an upper bound of the q-quantile; inf past the last bound); None if empty."""
        if not self.count:
            return None
        for bound, (_, n) in zip(BUCKETS, self.buckets, strict=True):
            if n >= q * self.count:
                return bound
        return BUCKETS[-1]


def fold(rows: Iterable[BucketRow]) -> list[Histogram]:
    """The database's rows, cumulated per (tube, metric), in that order. A row whose bound
    is not one of :data:`BUCKETS` (another version's) counts in the next bound above."""
    cells: dict[tuple[str, str], tuple[list[int], list[float]]] = {}
    for tube, metric, le, count, total in rows:
        counts, sums = cells.setdefault((tube, metric), ([0] * len(BUCKETS), [0.0]))
        counts[bisect.bisect_left(BUCKETS, float(le))] += int(count)
        sums[0] += float(total)
    found = []
    for (tube, metric), (counts, sums) in sorted(cells.items()):
        running, cumulated = 0, []
        for label, n in zip(LABELS, counts, strict=True):
            running += n
            cumulated.append((label, running))
        found.append(Histogram(tube, metric, cumulated, running, sums[0]))
    return found
