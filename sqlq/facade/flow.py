"""The Queue's verbs on a tube's flow: a pause, concurrency and rate limits, and how long
the records of its finished jobs are kept (retention, sqlq/finished.py).

A mixin of :class:`~sqlq.Queue`, as ``Puts`` and ``Reads`` are (the logic of the limits
is in sqlq/core/limits.py); see the Queue for the class's docs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..core import limits
from ..core.durations import seconds_to_ms
from ..model import check_tube

if TYPE_CHECKING:
    from ..finished import Retention
    from ..verbs.engine import Engine
    from ..verbs.operations import Operations


class FlowControl:
    """The Queue's verbs on a tube's flow (see :class:`~sqlq.Queue` for the class's docs)."""

    # Set by Queue.__init__.
    operations: Operations
    engine: Engine

    def pause_tube(self, tube: str, seconds: float) -> None:
        """Reserve nothing from ``tube`` for ``seconds`` (0 ends a pause).

        Any valid name can be paused, with jobs or without.

        Raises:
            InvalidTube: ``tube`` is not a valid tube name.

        Examples:
            >>> q.pause_tube("thumbs", 600)  # hold the tube while you deploy
        """
        check_tube(tube)
        pause_ms = seconds_to_ms(seconds, "seconds")
        self.operations.pause_tube(tube, pause_ms)

    def limit(self, tube: str, *, concurrency: int | None = limits.KEEP,
              rate: tuple[int, float] | None = limits.KEEP,
              group_concurrency: int | None = limits.KEEP,
              group_rate: tuple[int, float] | None = limits.KEEP) -> dict[str, Any]:
        """Cap the tube's reservations and/or pace its claims, for every process and host.

        ``concurrency=K``: at most K jobs of the tube reserved under live leases at once
        (an expired lease does not count). ``rate=(N, seconds)``: at most N claims per
        ``seconds``, as a token bucket of N tokens refilled continuously (a burst of N
        after an idle spell, then one claim every ``seconds``/N). ``None`` removes that
        limit; an argument not given stays as it is. Stored in the database: every
        reserve, worker and ``sqlq serve`` obeys it from this commit on, enforced inside
        the claim. A reserve watching a limited tube with others takes from the others
        while the limited one is full; a blocked reserve wakes when a slot frees or the
        rate allows the next claim. ``reserve_job(id)`` is not limited.

        ``group_concurrency=K`` and ``group_rate=(N, seconds)`` are the same limits for
        each group of the tube (``put(..., group=)``) on its own, combined with the
        tube's: a reserve that finds only capped groups takes other groups' jobs, or
        waits and wakes when a slot frees. Jobs without a group obey the tube's alone.

        Returns:
            The tube's limits now: ``{"concurrency": K or None, "rate": (N, seconds) or None}``,
            and ``group_concurrency``, ``group_rate`` when a group limit is set or given.

        Raises:
            InvalidTube: ``tube`` is not a valid tube name.
            TypeError, ValueError: ``concurrency`` is not an int of 1 or more, or
                ``rate`` is not a pair (int N of 1 or more, seconds of 0.001 or more).

        Examples:
            >>> q.limit("emails", concurrency=2, rate=(20, 1))  # 2 at once, 20 a second
            {'concurrency': 2, 'rate': (20, 1.0)}
            >>> q.limit("emails", concurrency=None, rate=None)  # no limits
            {'concurrency': None, 'rate': None}
            >>> q.limit("syncs", group_concurrency=1)  # one sync per account at once
            {'concurrency': None, 'rate': None, 'group_concurrency': 1, 'group_rate': None}
        """
        doc = self.operations.limit(tube, concurrency, rate, group_concurrency, group_rate)
        self.engine.forget_limits()
        return doc

    def limits(self) -> dict[str, dict[str, Any]]:
        """Every tube with limits: ``{tube: {"concurrency": K or None, "rate": (N, seconds)
        or None}}``, with ``group_concurrency`` and ``group_rate`` where a group limit is
        set (see :meth:`limit`).

        Examples:
            >>> q.limits()
            {'emails': {'concurrency': 2, 'rate': (20, 1.0)}}
        """
        return self.operations.limits()

    def retention(self, tube: str | None = None, *, max_age: float | None = None,
                  max_count: int | None = None) -> None:
        """Keep the records of finished jobs (:meth:`finished`) of ``tube`` (None: of
        every tube without its own setting) ``max_age`` seconds, at most ``max_count``
        per outcome (done, deleted, cancelled), the newest. None: the default (every
        tube's, else a week and 10,000). Workers prune once a minute, in small batches.

        Raises:
            InvalidTube: ``tube`` is not a valid tube name.
            ValueError: ``max_age`` is not positive, or ``max_count`` is below 0.

        Examples:
            >>> q.retention(max_age=86400)  # a day, for every tube
            >>> q.retention("payments", max_age=30 * 86400, max_count=100_000)
        """
        from ..model import check_int

        name = "" if tube is None else check_tube(tube)
        age_ms = None
        if max_age is not None:
            age_ms = seconds_to_ms(max_age, "max_age")
            if age_ms <= 0:
                raise ValueError("max_age must be above 0 seconds")
        if max_count is not None and check_int(max_count, "max_count") < 0:
            raise ValueError("max_count must be 0 or more")
        self.operations.retention(name, age_ms, max_count)

    def retentions(self) -> dict[str, Retention]:
        """How long finished records are kept: ``""`` (every tube without its own
        setting) and each tube set on its own, with the defaults filled in.

        Examples:
            >>> q.retentions()[""]
            Retention(max_age=604800, max_count=10000)
        """
        return self.operations.retentions()

    def prune(self) -> dict[str, int]:
        """Delete the finished records past their retention and the expired results now,
        in short transactions of 500 rows (``sqlq work`` does it once a minute); how many
        of each.

        Examples:
            >>> q.prune()
            {'finished': 0, 'results': 0, 'more': 0}
        """
        return self.operations.prune()
