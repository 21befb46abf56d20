"""The retry policy of failed jobs: how many attempts, and how long to wait between them.

Kept out of the worker loop on purpose (dramatiq's retries middleware is the model):
the worker asks two questions, :meth:`RetryPolicy.should_retry` and
:meth:`RetryPolicy.delay_for`, and releases the job with that delay or buries it.
The waiting curve itself is one of tenacity's wait strategies, so anything tenacity
can express (fixed, random, chained, exponential with jitter) can be a backoff.

The attempt number is the job's ``reserves`` counter: 1 on the first run. It also
counts runs that ended by a timeout or by the death of a worker, so a job that
crashes its worker every time is buried too instead of looping for ever.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import tenacity
from tenacity.wait import wait_base

#: Retries of a task or shell command unless it says otherwise (docs/spec.md: ``--retries`` 3).
DEFAULT_RETRIES = 3
#: Seconds before the first retry; each later one waits about twice as long.
DEFAULT_BACKOFF = 1.0
#: No retry waits longer than this (seconds).
MAX_BACKOFF = 3600.0

#: What ``backoff=`` accepts: seconds before the first retry, or any tenacity wait strategy.
Backoff = float | int | wait_base


def exponential_jitter(initial: float = DEFAULT_BACKOFF, maximum: float = MAX_BACKOFF) -> wait_base:
    """``initial * 2**(attempt-1)`` plus up to ``initial`` of random jitter, capped at maximum.

    The jitter is proportional to the first delay so that a short backoff stays short
    (tests) and many jobs failing together (a database down) spread their retries.
    Built from ``wait_exponential`` and ``wait_random``, which every tenacity since
    the floor in pyproject.toml has; ``wait_exponential_jitter(multiplier=)`` came
    only in 2026 releases, and on older ones made every ``@q.task`` a TypeError.
    """
    exponential = tenacity.wait_exponential(multiplier=initial, max=maximum)
    return exponential + tenacity.wait_random(0, initial)


def _wait_strategy(backoff: Backoff) -> wait_base:
    if isinstance(backoff, wait_base):
        return backoff
    if isinstance(backoff, bool) or not isinstance(backoff, (int, float)) \
            or math.isnan(backoff) or backoff < 0:
        raise TypeError("backoff must be seconds (a number >= 0) or a tenacity wait strategy, "
                        f"not {backoff!r}")
    return exponential_jitter(float(backoff))


@dataclass(frozen=True)
class RetryPolicy:
    """How often a failed job is run again, and after how long.

    Args:
        retries: runs after the first one; ``retries=3`` means up to 4 runs, then bury.
        backoff: seconds before the first retry (doubling after that, with jitter), or a
            tenacity wait strategy such as ``tenacity.wait_fixed(30)``.
    """

    retries: int = DEFAULT_RETRIES
    backoff: Backoff = DEFAULT_BACKOFF
    _wait: wait_base = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if isinstance(self.retries, bool) or not isinstance(self.retries, int) \
                or self.retries < 0:
            raise ValueError(f"retries must be an int >= 0, not {self.retries!r}")
        object.__setattr__(self, "_wait", _wait_strategy(self.backoff))

    def should_retry(self, attempt: int) -> bool:
        """True if a job whose run number ``attempt`` (1-based) failed should run again."""
        return attempt <= self.retries

    def exhausted(self, unfinished: int) -> bool:
        """True if a job had ``unfinished`` runs that ended without a verdict, more than
        the retries allow.

        Failures that the worker sees are counted by :meth:`should_retry`; this catches
        runs it never saw end: a job that outlived its TTR or killed its worker again
        and again is reserved once more, and is then buried instead of run.
        """
        return unfinished > self.retries

    def delay_for(self, attempt: int) -> float:
        """Seconds to wait before the run after failed run number ``attempt``."""
        state = tenacity.RetryCallState(tenacity.Retrying(), None, (), {})
        state.attempt_number = max(1, attempt)
        return max(0.0, min(float(self._wait(state)), MAX_BACKOFF))
