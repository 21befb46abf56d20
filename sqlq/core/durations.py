"""Durations as people type them (``30``, ``1.5``, ``500ms``, ``5m``) and the wall clock.

The public API takes seconds as floats; the store keeps integer milliseconds since the
epoch (the file outlives reboots, so a monotonic clock would be meaningless there).
This module is the one place that converts between the two spellings of time.
"""

from __future__ import annotations

import math
import re
import time

__all__ = ["MAX_SECONDS", "UNITS", "check_seconds", "format_duration", "now_ms", "parse_duration",
           "seconds_to_ms"]

#: Seconds per unit suffix. A bare number means seconds, as in beanstalkd.
UNITS: dict[str, float] = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}

#: The longest duration anywhere in sqlq: beanstalkd's bound on delay, TTR and pause
#: (2**32-1 s, about 136 years), which sqlq also puts on timeouts, so that no value
#: overflows a deadline and "forever" is spelled None (no --timeout), never a big number.
MAX_SECONDS = 2**32 - 1

# ASCII digits only: Python's \d and float() also take "１２" and "٣", which nobody means.
_DURATION_RE = re.compile(r"(?P<number>\d+(?:\.\d*)?|\.\d+)\s*(?P<unit>ms|s|m|h|d)?", re.ASCII)


def now_ms() -> int:
    """Wall-clock milliseconds since the epoch, the unit of every ``*_at``/``*_until`` column."""
    return time.time_ns() // 1_000_000


def parse_duration(text: str | float | int) -> float:
    """Parse a duration into seconds.

    Accepts a number of seconds (``30``, ``1.5``) or a number with one unit suffix:
    ``ms``, ``s``, ``m``, ``h`` or ``d`` (``500ms``, ``10s``, ``5m``, ``2h``, ``1d``).
    Units are case-insensitive and may be separated from the number by spaces.
    Negative, infinite and NaN values are refused: every duration in sqlq (delay,
    TTR, timeout, pause) is a length of time from now. So are values over
    ``MAX_SECONDS`` and digits other than ASCII 0-9.

    Args:
        text: the duration as typed, or a number of seconds.

    Returns:
        The duration in seconds.

    Raises:
        ValueError: the text is not a duration; the message quotes it and lists the units.
    """
    if isinstance(text, bool):
        raise TypeError("a duration must be a string or a number, not a bool")
    if isinstance(text, (int, float)):
        seconds = float(text)
    else:
        match = _DURATION_RE.fullmatch(text.strip().lower())
        if match is None and text.strip().startswith("-"):
            raise ValueError(f"{text!r} is not a duration: it must not be negative")
        if match is None:
            raise ValueError(
                f"{text!r} is not a duration: use seconds (30, 1.5) "
                "or a number with ms, s, m, h or d (500ms, 10s, 5m, 2h, 1d)"
            )
        seconds = float(match["number"]) * UNITS[match["unit"] or "s"]
    if math.isnan(seconds) or math.isinf(seconds) or seconds < 0:
        raise ValueError(f"{text!r} is not a duration: it must be a finite number >= 0")
    if seconds > MAX_SECONDS:
        raise ValueError(f"{text!r} is not a duration: at most {MAX_SECONDS} seconds "
                         "(about 136 years)")
    return seconds


def format_duration(seconds: float) -> str:
    """Render seconds compactly for people (``750ms``, ``42s``, ``5m03s``, ``2h10m``, ``3d4h``).

    Used by ``sqlq top`` and plain-text stats, where columns must stay narrow.
    """
    if seconds < 0:
        return "-" + format_duration(-seconds)
    if seconds < 1:
        return f"{round(seconds * 1000)}ms"
    whole = int(seconds)
    if whole < 60:
        return f"{seconds:.0f}s" if seconds == whole or seconds >= 10 else f"{seconds:.1f}s"
    minutes, secs = divmod(whole, 60)
    if minutes < 60:
        return f"{minutes}m{secs:02d}s"
    hours, minutes = divmod(minutes, 60)
    if hours < 24:
        return f"{hours}h{minutes:02d}m"
    days, hours = divmod(hours, 24)
    return f"{days}d{hours}h"


def check_seconds(value: object, name: str) -> float:
    """A length of time in seconds, 0 to MAX_SECONDS (every delay, TTR, pause and
    timeout); TypeError or ValueError naming the argument otherwise."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{name} must be a number of seconds, not {type(value).__name__}")
    if math.isnan(value) or value < 0 or value > MAX_SECONDS:
        raise ValueError(f"{name} must be between 0 and {MAX_SECONDS} seconds, not {value}")
    return value


def seconds_to_ms(value: object, name: str, *, minimum: float = 0.0) -> int:
    """Seconds (int or float) to whole milliseconds, rejecting what no queue could mean."""
    if value.__class__ is int and 0 <= value <= MAX_SECONDS:  # the hot path: put's delay=0
        return max(value * 1000, int(minimum * 1000))
    return max(math.ceil(check_seconds(value, name) * 1000), int(minimum * 1000))
