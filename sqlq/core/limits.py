"""Flow control: a tube's concurrency cap and rate, and each of its groups' (``Queue.limit``,
``sqlq limit``).

A limit is stored on the tube's row in the database (``sqlq_tubes``), so every process,
host and ``sqlq serve`` obeys it from the commit that sets it. It is enforced inside the
claim, never by a worker counting its own:

* **concurrency K**: at most K jobs of the tube reserved under live leases at once
  (an expired lease does not count: its job is as good as ready);
* **rate (N, seconds)**: a token bucket of N tokens, refilled continuously at N per
  ``seconds``; a claim takes one. The burst is N: a tube idle for ``seconds`` gives N
  claims at once, then one every ``seconds``/N. Over a window of W seconds a tube gives
  at most N + N·W/``seconds`` claims (10 s at 20/s: at most 220, and 200 or more when
  jobs and workers keep up). Stored as GCRA does (one time, ``rate_at``: the earliest
  next claim), so spending it is one write.

How a claim honours them (``Engine``): the claims every worker makes skip a tube with
limits exactly as they skip a paused one, in the same probe of its row (so a tube
without limits pays nothing); a list of watched tubes known to hold a limited one is
claimed through :meth:`~sqlq.backends.store.limits.LimitStore.claim_limited` instead, in
one write transaction that counts the live reservations, claims at most the free slots and the
tokens, and spends the tokens, by ``allowance.py``'s arithmetic (SQLite's one writer
serialises it; PostgreSQL locks the limited tubes' rows). A blocked waiter wakes on the
commit that frees a slot (a delete, release, bury, a dead holder reaped; on PostgreSQL
the delete of a job reserved under a cap sends NOTIFY, ``sqlq_jobs.capped``, and
``sqlq serve`` pokes its own waiters) and, for the rate, at the time of the next token
(``next_due``), never by polling.

The same two limits per group of the tube (``group_concurrency``, ``group_rate``: each
group of a grouped tube, sqlq/backends/store/groups.py, capped on its own) combine with
the tube's: a claim takes a job only if its tube and its group both allow it. Jobs
without a group are limited by the tube's alone.

``reserve_job(id)`` (beanstalkd's reserve-job) bypasses the limits: an operator's act
on one named job; the job it takes counts against the cap while it is reserved.
"""

from __future__ import annotations

import re
from typing import Any

from .durations import check_seconds


class _Keep:
    """The default of ``Queue.limit``'s arguments: leave that limit as it is."""

    def __repr__(self) -> str:
        return "unchanged"


#: "unchanged", for the arguments of ``Queue.limit`` a caller did not give.
KEEP: Any = _Keep()

_UNITS = {"s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}
_RATE_TEXT = re.compile(r"\s*(\d+)\s*/\s*(\d*(?:\.\d+)?)\s*([smhd])\s*")


def check_concurrency(value: object, name: str = "concurrency") -> int | None:
    """A concurrency cap: an int of 1 or more, or None (no cap)."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an int or None, not {type(value).__name__}")
    if not 1 <= value <= 2**31 - 1:
        raise ValueError(f"{name} must be 1 or more (pause_tube stops a tube), not {value}")
    return value


def check_rate(value: object, name: str = "rate") -> tuple[int, int] | None:
    """A rate ``(N, seconds)`` as (N, ms), or None (no rate)."""
    if value is None:
        return None
    if not isinstance(value, (tuple, list)) or len(value) != 2:
        raise TypeError(f"{name} must be a pair (N, seconds) or None, not {value!r}")
    n, seconds = value
    if isinstance(n, bool) or not isinstance(n, int):
        raise TypeError(f"{name}'s N must be an int, not {type(n).__name__}")
    if not 1 <= n <= 2**31 - 1:
        raise ValueError(f"{name}'s N must be 1 or more, not {n}")
    period_ms = round(check_seconds(seconds, f"{name}'s seconds") * 1000)
    if period_ms < 1:
        raise ValueError(f"{name}'s seconds must be at least 0.001, not {seconds!r}")
    return n, period_ms


def parse_rate(text: str) -> tuple[int, float]:
    """``"20/s"``, ``"100/m"``, ``"5/h"``, ``"3/10s"`` as (N, seconds) (the CLI's --rate)."""
    match = _RATE_TEXT.fullmatch(text)
    if match is None:
        raise ValueError(f"rate must look like 20/s, 100/m, 5/h or 3/10s, not {text!r}")
    n, count, unit = match.groups()
    return int(n), (float(count) if count else 1.0) * _UNITS[unit]


def parse_concurrency(text: str) -> int | None:
    """A cap as people type it (the CLI, the dashboard): K, or ``none``/empty for no cap."""
    if text.strip().lower() in ("", "none"):
        return None
    try:
        number = int(text)
    except ValueError:
        raise ValueError(f"concurrency must be a whole number or none, not {text!r}") from None
    return check_concurrency(number)


def parse_rate_limit(text: str) -> tuple[int, float] | None:
    """A rate as people type it: ``20/s`` (checked), or ``none``/empty for no rate."""
    if text.strip().lower() in ("", "none"):
        return None
    n, seconds = parse_rate(text)
    check_rate((n, seconds))
    return n, seconds


def format_rate(n: int, seconds: float) -> str:
    """(N, seconds) as the CLI writes it: 20/s, 100/m, 5/h, 3/10s."""
    for unit, size in (("h", 3600.0), ("m", 60.0), ("s", 1.0)):
        if seconds == size:
            return f"{n}/{unit}"
    return f"{n}/{seconds:g}s"


def _rate_doc(n: int | None, ms: int | None) -> tuple[int, float] | None:
    return None if n is None or ms is None else (n, ms / 1000)


def limits_doc(cap: int | None, n: int | None, ms: int | None, group_cap: int | None = None,
               group_n: int | None = None, group_ms: int | None = None, *,
               groups: bool = False) -> dict[str, Any]:
    """One tube's limits as the API gives them (``Queue.limit``, ``Queue.limits``): with
    ``group_concurrency`` and ``group_rate`` beside, when either is set (or ``groups``)."""
    doc: dict[str, Any] = {"concurrency": cap, "rate": _rate_doc(n, ms)}
    if groups or group_cap is not None or group_n is not None:
        doc["group_concurrency"] = group_cap
        doc["group_rate"] = _rate_doc(group_n, group_ms)
    return doc
