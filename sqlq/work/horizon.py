"""``sqlq work``'s look at what holds back the cleanup of deleted jobs (:mod:`sqlq.horizon`).

The loop compares the clock with :attr:`HorizonWatch.due` once per turn, with its other
housekeeping (``JobHandling.tick``), and calls :meth:`HorizonWatch.check` at most every
``SQLQ_HORIZON_CHECK`` seconds (30 by default): one look (``Queue.horizon``: two reads
of the server's statistics on PostgreSQL, a passive checkpoint on SQLite), never one
per claim.
A threshold passed (``SQLQ_WARN_HORIZON_AGE``, ``SQLQ_WARN_WAL_SIZE``) is logged once
as a warning when it is first seen, and once more when it clears: not at every look.
"""

from __future__ import annotations

import logging
import time

from ..errors import Error
from ..horizon import DOCS_PAGE, Thresholds, alarms, check_every
from ..queue import Queue

log = logging.getLogger("sqlq.worker")


class HorizonWatch:
    """One worker's periodic look at the horizon, and the warnings it has raised.

    Args:
        queue: the worker's queue.
        thresholds: when to warn; None reads them from the environment.
        every: seconds between looks; None reads ``SQLQ_HORIZON_CHECK``.
    """

    def __init__(self, queue: Queue, thresholds: Thresholds | None = None,
                 every: float | None = None) -> None:
        self.queue = queue
        self.thresholds = Thresholds.from_env() if thresholds is None else thresholds
        self.every = check_every() if every is None else every
        self.raised: set[str] = set()  # the alarms warned about and not yet cleared
        #: Monotonic time of the next look (the first turn looks); the loop compares it
        #: itself, inline: the per-turn cost is one comparison, not a call.
        self.due = 0.0
        self._failing = False

    def check(self) -> None:
        """Look now; warn about an alarm new since the last look, say which ones cleared."""
        self.due = time.monotonic() + self.every
        try:
            found = alarms(self.queue.horizon(), self.thresholds)
        except Error as e:
            if not self._failing:
                log.warning("could not look at what holds back the cleanup of deleted jobs "
                            "(trying again every %gs): %s", self.every, e)
            self._failing = True
            return
        self._failing = False
        for key, text in found.items():
            if key not in self.raised:
                log.warning("%s (see the docs: %s)", text, DOCS_PAGE, extra={"reason": key})
        for key in sorted(self.raised - set(found)):
            log.info("cleared: %s", _CLEARED[key], extra={"reason": key})
        self.raised = set(found)


_CLEARED = {"horizon": "no snapshot holds back the cleanup of deleted jobs past the threshold",
            "wal": "the -wal file is back under the threshold"}
