"""``sqlq top``: a live, refreshing view of every tube, like ``top`` for the queue.

It draws with a handful of plain ANSI escapes (alternate screen, cursor home, clear to
end of line) rather than curses, so it needs no terminfo entry and works over ssh in
any terminal that understands VT100. Throughput is not stored anywhere: it is computed
from successive samples of the file's counters (``total-jobs`` for puts; puts minus
the growth of the live count for jobs done), averaged over the last few seconds.
"""

from __future__ import annotations

import contextlib
import os
import select
import shutil
import sys
import time
from collections import deque
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import IO, Any

from sqlq.core.durations import format_duration

__all__ = ["Sample", "rates", "render", "run_top", "take_sample"]

#: Throughput is averaged over this many seconds of samples, so one refresh that
#: happens to see a burst does not make the numbers jump.
RATE_WINDOW = 5.0

_COUNTS = ("current-jobs-ready", "current-jobs-urgent", "current-jobs-reserved",
           "current-jobs-delayed", "current-jobs-buried", "current-jobs-waiting")
#: The counts whose sum is the live jobs (urgent ones are counted among the ready).
_LIVE = tuple(k for k in _COUNTS if k != "current-jobs-urgent")
_HEADER = ("TUBE", "READY", "URGENT", "RESERVED", "DELAYED", "BURIED", "WAITING", "PAUSED")

# ANSI: alternate screen + hidden cursor on entry, the reverse on exit; home; clear.
_ENTER, _LEAVE = "\x1b[?1049h\x1b[?25l", "\x1b[?25h\x1b[?1049l"
_HOME, _CLEAR_EOL, _CLEAR_DOWN = "\x1b[H", "\x1b[K", "\x1b[J"
_BOLD, _RESET = "\x1b[1m", "\x1b[0m"


@dataclass(frozen=True)
class Sample:
    """The file's and every tube's stats at one moment (``at`` is monotonic seconds)."""

    at: float
    total: Mapping[str, Any]
    tubes: Mapping[str, Mapping[str, Any]]


def take_sample(queue: Any) -> Sample:
    """Read the file's stats and each tube's (``queue.views``' reads); a tube that empties
    meanwhile is skipped."""
    views = queue.views
    tubes: dict[str, Mapping[str, Any]] = {}
    for name in views.tubes():
        try:
            tubes[name] = views.stats_tube(name)
        except Exception:  # noqa: BLE001 - a tube emptied mid-sample simply drops out
            continue
    return Sample(time.monotonic(), views.stats(), tubes)


def _num(stats: Mapping[str, Any], key: str) -> int:
    value = stats.get(key, 0)
    return int(value) if isinstance(value, (int, float)) else 0


def rates(old: Sample | None, new: Sample) -> tuple[float, float] | None:
    """(puts/s, done/s) of the whole file between two samples; None without history.

    ``total-jobs`` of the file counts every put ever made, from any process; jobs
    done (deleted) are the puts that did not grow the live count.
    """
    if old is None or new.at - old.at <= 0:
        return None
    puts = _num(new.total, "total-jobs") - _num(old.total, "total-jobs")
    live = sum(_num(new.total, k) - _num(old.total, k) for k in _LIVE)
    span = new.at - old.at
    return max(puts, 0) / span, max(puts - live, 0) / span


def render(samples: deque[Sample], title: str, width: int = 100, height: int = 40) -> list[str]:
    """The screen as lines (no escapes): title, throughput, a header, a row per tube, totals."""
    new = samples[-1]
    rate = rates(samples[0] if len(samples) > 1 else None, new)
    span = new.at - samples[0].at
    speed = ("measuring..." if rate is None else
             f"{rate[0]:.1f} put/s  {rate[1]:.1f} done/s  (last {format_duration(span)})")
    rows: list[tuple[str, ...]] = [_HEADER]
    totals = [0] * len(_COUNTS)
    for name in sorted(new.tubes):
        stats = new.tubes[name]
        counts = [_num(stats, k) for k in _COUNTS]
        totals = [a + b for a, b in zip(totals, counts, strict=True)]
        left = _num(stats, "pause-time-left")
        rows.append((name, *map(str, counts), format_duration(left) if left else ""))
    rows.append(("ALL", *map(str, totals), ""))
    widths = [max(len(r[i]) for r in rows) for i in range(len(_HEADER))]
    lines = [title, f"jobs: {_num(new.total, 'total-jobs')} put in all  {speed}", ""]
    for row in rows:
        cells = [row[0].ljust(widths[0])]
        cells += [c.rjust(w) for c, w in zip(row[1:], widths[1:], strict=True)]
        lines.append("  ".join(cells).rstrip())
    if len(lines) > height:  # keep the header; say how many rows did not fit
        hidden = len(lines) - height + 1
        lines = lines[: height - 1] + [f"... {hidden} more rows (enlarge the terminal)"]
    return [line[:width] for line in lines]


@contextlib.contextmanager
def _terminal(out: IO[str], keys: IO[str] | None) -> Iterator[None]:
    """Alternate screen, hidden cursor and unbuffered keys; everything restored on exit."""
    saved = None
    if keys is not None:
        import termios
        import tty

        saved = termios.tcgetattr(keys.fileno())
        tty.setcbreak(keys.fileno())  # keys arrive one by one; Ctrl-C still sends SIGINT
    out.write(_ENTER)
    out.flush()
    try:
        yield
    finally:
        out.write(_LEAVE)
        out.flush()
        if saved is not None:
            import termios

            termios.tcsetattr(keys.fileno(), termios.TCSADRAIN, saved)  # type: ignore[union-attr]


def _wait_for_quit(keys: IO[str] | None, timeout: float) -> bool:
    """Sleep up to ``timeout`` seconds; True when q (or Q, or end of input) was typed."""
    if keys is None:
        time.sleep(timeout)
        return False
    deadline = time.monotonic() + timeout
    while (left := deadline - time.monotonic()) > 0:
        ready, _, _ = select.select([keys], [], [], left)
        if ready:
            data = os.read(keys.fileno(), 64)
            if not data or data[:1] in (b"q", b"Q"):
                return True
    return False


def _terminal_size(out: IO[str]) -> os.terminal_size:
    """The size of the terminal drawn on, asked afresh each frame so a resize shows.

    $COLUMNS/$LINES (which shutil prefers) are a snapshot from the shell's start.
    """
    try:
        return os.get_terminal_size(out.fileno())
    except (OSError, ValueError, AttributeError):
        return shutil.get_terminal_size()


def run_top(queue: Any, *, interval: float = 1.0, once: bool = False,
            out: IO[str] | None = None) -> None:
    """Show the live view until q or Ctrl-C; on a non-terminal, print snapshots instead.

    Args:
        queue: the Queue to watch (only ``tubes()`` and ``stats_tube()`` are used).
        interval: seconds between refreshes.
        once: print a single snapshot and return (for scripts and pipes).
        out: where to draw; stdout by default.
    """
    out = out or sys.stdout
    path = getattr(queue, "path", "")
    samples: deque[Sample] = deque()

    def sample() -> list[str]:
        samples.append(take_sample(queue))
        while len(samples) > 2 and samples[-1].at - samples[1].at >= RATE_WINDOW:
            samples.popleft()
        size = _terminal_size(out)
        clock = time.strftime("%H:%M:%S")
        head = f"sqlq top  {clock}  every {format_duration(interval)}  q: quit  {path}"
        return render(samples, head, size.columns, size.lines - 1)

    interactive = not once and out.isatty()
    if not interactive:  # batch mode: plain snapshots, like `top -b`
        try:
            while True:
                out.write("\n".join(sample()) + "\n")
                out.flush()
                if once:
                    return
                time.sleep(interval)
                out.write("\n")
        except KeyboardInterrupt:
            return
    keys = sys.stdin if sys.stdin.isatty() else None
    try:
        with _terminal(out, keys):
            while True:
                lines = sample()
                lines[0] = _BOLD + lines[0] + _RESET
                out.write(_HOME + "".join(line + _CLEAR_EOL + "\n" for line in lines)
                          + _CLEAR_DOWN)
                out.flush()
                if _wait_for_quit(keys, interval):
                    return
    except KeyboardInterrupt:
        return  # Ctrl-C is the other way to quit, not an error
