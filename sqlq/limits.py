"""Flow control: a tube's concurrency cap and rate (``Queue.limit``, ``sqlq limit``).

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

``reserve_job(id)`` (beanstalkd's reserve-job) bypasses the limits: an operator's act
on one named job; the job it takes counts against the cap while it is reserved.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from .model import check_seconds, check_tube

if TYPE_CHECKING:
    from .backends import Backend
    from .backends.base import Conn

class _Keep:
    """The default of ``Queue.limit``'s arguments: leave that limit as it is."""

    def __repr__(self) -> str:
        return "unchanged"


#: "unchanged", for the arguments of :func:`set_limits` a caller did not give.
KEEP: Any = _Keep()

_UNITS = {"s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}
_RATE_TEXT = re.compile(r"\s*(\d+)\s*/\s*(\d*(?:\.\d+)?)\s*([smhd])\s*")


def check_concurrency(value: object) -> int | None:
    """A concurrency cap: an int of 1 or more, or None (no cap)."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"concurrency must be an int or None, not {type(value).__name__}")
    if not 1 <= value <= 2**31 - 1:
        raise ValueError(f"concurrency must be 1 or more (pause_tube stops a tube), not {value}")
    return value


def check_rate(value: object) -> tuple[int, int] | None:
    """A rate ``(N, seconds)`` as (N, ms), or None (no rate)."""
    if value is None:
        return None
    if not isinstance(value, (tuple, list)) or len(value) != 2:
        raise TypeError(f"rate must be a pair (N, seconds) or None, not {value!r}")
    n, seconds = value
    if isinstance(n, bool) or not isinstance(n, int):
        raise TypeError(f"rate's N must be an int, not {type(n).__name__}")
    if not 1 <= n <= 2**31 - 1:
        raise ValueError(f"rate's N must be 1 or more, not {n}")
    period_ms = round(check_seconds(seconds, "rate's seconds") * 1000)
    if period_ms < 1:
        raise ValueError(f"rate's seconds must be at least 0.001, not {seconds!r}")
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


# -- setting and reading (Queue.limit, Queue.limits) --------------------------------------------

def set_limits(backend: Backend, clock: Callable[[], int], tube: str,
               concurrency: Any = KEEP, rate: Any = KEEP) -> dict[str, Any]:
    """Set (or with None remove) the tube's limits; an argument left as KEEP stays as it
    is. Returns the tube's limits as :func:`read_limits` gives them. Checked whole before
    anything is written."""
    check_tube(tube)
    cap = KEEP if concurrency is KEEP else check_concurrency(concurrency)
    pace = KEEP if rate is KEEP else check_rate(rate)
    store = backend.store

    def write(c: Conn) -> None:
        old = store.limits.list_limits(c, tube)
        had = old[0] if old else (tube, None, None, None)
        new_cap = had[1] if cap is KEEP else cap
        n, ms = (had[2], had[3]) if pace is KEEP else (pace or (None, None))
        if (new_cap, n, ms) == had[1:]:
            return  # unchanged: a rate's bucket is not refilled by setting it again
        store.limits.set_limits(c, tube, new_cap, n, ms)

    backend.write(write)
    return read_limits(backend, tube).get(tube, {"concurrency": None, "rate": None})


def read_limits(backend: Backend, tube: str | None = None) -> dict[str, dict[str, Any]]:
    """tube -> {"concurrency": K or None, "rate": (N, seconds) or None}, for every tube
    with limits (or only ``tube``)."""
    rows = backend.read(lambda c: backend.store.limits.list_limits(c, tube))
    return {name: limits_doc(cap, n, ms) for name, cap, n, ms in rows}


def limits_doc(cap: int | None, n: int | None, ms: int | None) -> dict[str, Any]:
    """One tube's limits as the API gives them."""
    return {"concurrency": cap, "rate": None if n is None or ms is None else (n, ms / 1000)}
