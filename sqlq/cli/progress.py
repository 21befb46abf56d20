"""The progress bar of long commands (``copy``, ``backup``, ``put-many``, ``maintain``).

One line on stderr, redrawn in place at most ten times a second, ended by a final line:
the count so far, its rate, and (when the work's size is known cheaply) a bar, the
percentage and the time left. It is drawn only when stderr is a terminal and
``--quiet`` was not given: stdout carries what scripts parse, and a log or a pipe
gets no carriage returns. click's ``progressbar`` was the other way: it redraws on
every step (a million steps, a million writes), shows no rate, and its ETA is of
items, where ours may be of ids or bytes; so a small one of our own.

The work reports through a plain callable, ``progress(count, fraction)``: ``count``
done so far (jobs, bytes), ``fraction`` of the whole (0-1) or None when the whole
is not known. The library's functions take that callable (``sqlq.copy.copy``,
``Queue.backup``) and know nothing of terminals.
"""

from __future__ import annotations

import os
import shutil
import sys
import time
from collections.abc import Callable
from types import TracebackType
from typing import IO

import click

#: Redraws a second, at most: enough to look live, few enough to cost nothing.
REDRAWS_PER_SECOND = 10
#: Clear from the cursor to the end of the line (the previous line may be longer).
CLEAR = "\x1b[K"


def quiet_option(fn: Callable[..., object]) -> Callable[..., object]:
    """``--quiet``/``-q``: no progress bar, even on a terminal."""
    return click.option("--quiet", "-q", is_flag=True,
                        help="No progress bar on stderr (none is drawn when stderr is not "
                             "a terminal either).")(fn)


class Bar:
    """A progress line on ``stream``, or nothing when ``shown`` is False.

    Call it as the work goes (``bar(count, fraction)``): it redraws when a tenth of a
    second has passed since the last drawing. ``with Bar(...) as bar:`` ends it with a
    final line (``done`` names what was done), or, on an error, with the line as it
    stood (erased, if nothing was done), so the error message starts on a line of its own.
    """

    def __init__(self, label: str, unit: str, *, shown: bool, done: str | None = None,
                 scale: Callable[[int], str] | None = None, rate: bool = True,
                 stream: IO[str] | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.label = label
        self.rate = rate
        self.done = done or label
        self.unit = unit
        self.shown = shown
        self.scale = scale or "{:,}".format
        self.stream = stream if stream is not None else sys.stderr
        self.clock = clock
        self.started = clock()
        self.drawn_at: float | None = None
        self.count = 0
        self.fraction: float | None = None
        encoding = (getattr(self.stream, "encoding", None) or "").lower().replace("-", "")
        self.cells = ("█", "░") if encoding == "utf8" else ("#", "-")

    def __call__(self, count: int, fraction: float | None = None) -> None:
        self.count = count
        self.fraction = None if fraction is None else min(max(fraction, 0.0), 1.0)
        if not self.shown:
            return
        now = self.clock()
        if self.drawn_at is None or now - self.drawn_at >= 1 / REDRAWS_PER_SECOND:
            self.drawn_at = now
            self._draw(self.line(now, final=False), end="")

    def __enter__(self) -> Bar:
        if self.shown:
            self.drawn_at = self.clock()
            self._draw(self.line(self.drawn_at, final=False), end="")
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 tb: TracebackType | None) -> None:
        if not self.shown:
            return
        if kind is not None and not self.count:
            self._draw("", end="")  # failed before anything was done: only the error shows
            return
        if kind is None:
            self.fraction = None if self.fraction is None else 1.0
        self._draw(self.line(self.clock(), final=kind is None), end="\n")

    def line(self, now: float, *, final: bool) -> str:
        """The line as it stands at ``now``: label, bar and percentage (a known whole),
        count, rate, and the time left (running) or taken (``final``)."""
        elapsed = max(now - self.started, 1e-9)
        width = shutil.get_terminal_size((80, 24)).columns
        parts = [f"{self.done if final else self.label:<9}"]
        tail = [f"{self.scale(self.count)} {self.unit}"]
        if self.rate and (elapsed >= 0.2 or final):
            tail.append(f"{self.scale(round(self.count / elapsed))} {self.unit}/s")
        if final:
            tail.append(f"in {clock_text(elapsed)}")
        elif self.fraction is not None and self.fraction > 0 and elapsed >= 1:
            tail.append(f"ETA {clock_text(elapsed * (1 - self.fraction) / self.fraction)}")
        else:
            tail.append(clock_text(elapsed))
        if self.fraction is not None:
            percent = f"{self.fraction:4.0%}"
            room = width - 1 - len(parts[0]) - len("  ".join(tail)) - len(percent) - 6
            cells = max(10, min(40, room))
            full = int(self.fraction * cells)
            parts.append(self.cells[0] * full + self.cells[1] * (cells - full))
            parts.append(percent)
        return "  ".join(parts + tail)[:max(width - 1, 20)]

    def _draw(self, line: str, end: str) -> None:
        # One write per drawing, so the terminal never shows half a line.
        self.stream.write(f"\r{line}{CLEAR}{end}")
        self.stream.flush()


def bar(label: str, unit: str, *, quiet: bool, done: str | None = None,
        scale: Callable[[int], str] | None = None, rate: bool = True) -> Bar:
    """A Bar on stderr, shown when stderr is a terminal (not TERM=dumb) and not ``quiet``."""
    stream = sys.stderr
    shown = not quiet and stream.isatty() and os.environ.get("TERM") != "dumb"
    return Bar(label, unit, shown=shown, done=done, scale=scale, rate=rate, stream=stream)


def clock_text(seconds: float) -> str:
    """Seconds as ``M:SS``, or ``H:MM:SS`` from an hour."""
    whole = int(seconds + 0.5)
    hours, rest = divmod(whole, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}:{minutes:02}:{secs:02}" if hours else f"{minutes}:{secs:02}"


def megabytes(count: int) -> str:
    """A byte count as MB, for bars that count bytes."""
    return f"{count / 1e6:,.1f}"
