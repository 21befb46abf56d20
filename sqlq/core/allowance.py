"""The arithmetic of a limited tube's claim (``Store.claim_limited``): how many jobs it may
give now, and when its next token falls due after some are taken.

Pure, below the storage that runs it inside its claim's transaction; the limits
themselves, their checks and their verbs are in ``limits.py`` (see there for the token
bucket, stored as GCRA does: one time, ``rate_at``, the earliest next claim).
"""

from __future__ import annotations

import math


def allowance(concurrency: int | None, rate: int | None, rate_ms: int | None,
              rate_at: float | None, live: int, now: int) -> int:
    """How many jobs a limited tube may give now: its free slots and its tokens, the
    smaller (a large number for a limit not set)."""
    free = 2**31 if concurrency is None else max(concurrency - live, 0)
    if rate is None or rate_ms is None or rate_at is None:
        return free if rate is None else min(free, rate)
    spacing = rate_ms / rate
    tokens = math.floor(rate - (max(rate_at + (rate - 1) * spacing, now) - now) / spacing)
    return min(free, max(tokens, 0))


def spent_rate_at(rate: int, rate_ms: int, rate_at: float | None, now: int, taken: int
                  ) -> float:
    """The tube's new ``rate_at`` (the earliest next claim) after ``taken`` claims now."""
    spacing = rate_ms / rate
    full = (rate - 1) * spacing  # a full bucket's head start
    tat = now if rate_at is None else max(rate_at + full, now)
    return tat + taken * spacing - full
