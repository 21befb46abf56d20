"""The Queue's verbs on a tube's flow: a pause, concurrency and rate limits.

A mixin of :class:`~sqlq.Queue`, as ``Puts`` and ``Reads`` are (the logic of the limits
is in limits.py); see the Queue for the class's docs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from . import limits
from .model import check_tube, seconds_to_ms

if TYPE_CHECKING:
    from .verbs.engine import Engine
    from .verbs.operations import Operations


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
