"""Put and done rates over the last minutes, for the overview's chart.

Rates are differences of the file's own counters (puts, deletes) between two looks,
so they count every process's work. The samples live in this process and are taken
only when a page or the browser's poll asks for the overview: with no browser open
nothing is sampled and nothing runs, and the chart starts from the first look.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from dataclasses import dataclass

#: How far back the chart goes.
WINDOW = 600.0
#: Looks closer together than this share one sample (several tabs, one chart).
MIN_STEP = 1.0


@dataclass(frozen=True)
class Point:
    """Rates (per second) over the interval that ended at ``at`` (Unix seconds)."""

    at: float
    puts: float
    done: float


class History:
    """Samples of (time, puts, deletes); thread-safe (one thread per request)."""

    def __init__(self) -> None:
        self._samples: deque[tuple[float, float, int, int]] = deque()
        self._lock = threading.Lock()

    def record(self, puts: int, deletes: int) -> None:
        """Add a sample unless the last one is under MIN_STEP old; drop those past WINDOW."""
        now, wall = time.monotonic(), time.time()
        with self._lock:
            if self._samples and now - self._samples[-1][0] < MIN_STEP:
                return
            self._samples.append((now, wall, puts, deletes))
            while now - self._samples[0][0] > WINDOW:
                self._samples.popleft()

    def points(self) -> list[Point]:
        """The rate over each interval between consecutive samples, oldest first."""
        with self._lock:
            samples = list(self._samples)
        out = []
        for (t0, _, p0, d0), (t1, wall, p1, d1) in zip(samples, samples[1:], strict=False):
            span = t1 - t0
            out.append(Point(wall, max(p1 - p0, 0) / span, max(d1 - d0, 0) / span))
        return out
