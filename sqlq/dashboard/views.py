"""HTML: Jinja templates with autoescaping, and the filters that turn values into text.

Escaping is by construction: every template value goes through Jinja's autoescape
(nothing is marked safe anywhere, and no filter returns Markup), so a body, a tube
name or a bury reason is text whatever it holds. Bodies are shown as text, as
pretty-printed JSON, or as a hex dump for binary, and cut at :data:`BODY_LIMIT`.
"""

from __future__ import annotations

import base64
import binascii
import json
import time
from dataclasses import dataclass
from typing import Any, NamedTuple
from urllib.parse import quote, urlencode

import jinja2

from sqlq.core.durations import format_duration
from sqlq.errors import JobNotFound
from sqlq.histograms import Histogram
from sqlq.throughput import Minute

#: Bytes of a body the job page shows; the rest is summarised.
BODY_LIMIT = 64 * 1024
#: Characters of a body a list shows.
PREVIEW = 100


@dataclass(frozen=True)
class Body:
    """A body ready to show: how it is shown, the text, and how many bytes were left out."""

    kind: str  # "text", "json" or "hex"
    text: str
    size: int
    cut: int


def show_body(body: bytes, limit: int = BODY_LIMIT) -> Body:
    """JSON pretty-printed if it parses, else UTF-8 text if it decodes, else a hex dump."""
    head = body[:limit]
    cut = len(body) - len(head)
    try:
        text = head.decode("utf-8")
    except UnicodeDecodeError:
        kept = head.decode("utf-8", "ignore")
        if cut and len(head) - len(kept.encode()) <= 3 and head.startswith(kept.encode()):
            text = kept  # the limit fell inside a character: show up to it
            cut = len(body) - len(kept.encode())
        else:
            return Body("hex", hexdump(head), len(body), cut)
    if not cut:
        try:
            return Body("json", json.dumps(json.loads(text), indent=2, ensure_ascii=False),
                        len(body), 0)
        except ValueError:
            pass
    if any(not (c.isprintable() or c in "\n\t\r") for c in text):
        return Body("hex", hexdump(head), len(body), cut)
    return Body("text", text, len(body), cut)


def hexdump(data: bytes) -> str:
    """``offset  hex bytes  |ascii|`` lines, 16 bytes each."""
    lines = []
    for at in range(0, len(data), 16):
        chunk = data[at:at + 16]
        ascii_ = "".join(chr(b) if 32 <= b < 127 else "." for b in chunk)
        lines.append(f"{at:08x}  {chunk.hex(' '):<47}  |{ascii_}|")
    return "\n".join(lines)


def preview(body: bytes, size: int) -> str:
    """One line of a body for a list: printable text, or a note that it is binary."""
    text = body.decode("utf-8", "replace")
    if "\ufffd" in text[:-2] or any(not c.isprintable() for c in text if c not in "\n\t\r"):
        return f"(binary, {size} bytes)"
    text = " ".join(text.split())
    return text[:PREVIEW] + ("…" if size > PREVIEW or len(text) > PREVIEW else "")


def last_line(text: str) -> str:
    """The last non-blank line of a text: a traceback's exception, for a list."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1] if lines else ""


def age(since_ms: int | None, now_ms: int) -> str:
    """``5m03s`` since a moment, or an em dash when there is none."""
    return "—" if since_ms is None else format_duration(max(now_ms - since_ms, 0) / 1000)


def until(at_ms: int | None, now_ms: int) -> str:
    return "—" if at_ms is None else "in " + format_duration(max(at_ms - now_ms, 0) / 1000)


def quantiles(histogram: Histogram | None) -> str:
    """``≤ 50ms · ≤ 2.5s``: bounds of a histogram's median and 95th percentile."""
    if histogram is None or not histogram.count:
        return "—"

    def bound(q: float) -> str:
        b = histogram.quantile_bound(q)
        return "> 1h" if b == float("inf") else f"≤ {format_duration(b or 0)}"

    return f"{bound(0.5)} · {bound(0.95)}"


def stamp(at_ms: int | None) -> str:
    """A moment in UTC, to the second."""
    if at_ms is None:
        return "—"
    return time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(at_ms / 1000)) + "Z"


def tube_url(name: str, **params: Any) -> str:
    """The tube page's address: the name as a query value (tube names may hold ``/``)."""
    query = {"name": name, **{k: v for k, v in params.items() if v not in (None, "")}}
    return "/tube?" + urlencode(query, quote_via=quote)


@dataclass(frozen=True)
class DayChart:
    """The overview's last-day chart: SVG polyline points (600 x 120 box) for puts and
    deletes per minute, and the top of the scale."""

    puts: str
    done: str
    top: float


def day_chart(minutes: list[Minute], now_ms: int, span_ms: int = 24 * 3600 * 1000
              ) -> DayChart | None:
    """The points of :meth:`sqlq.Queue.throughput`'s minutes over the last day (x: time,
    right edge now; y: per minute, the top the largest value), or None if there are none."""
    if not minutes:
        return None
    top = max(max(m.puts, m.deletes) for m in minutes) or 1.0

    def points(values: list[tuple[int, float]]) -> str:
        return " ".join(f"{600 * (1 - min(max(now_ms - at, 0), span_ms) / span_ms):.1f},"
                        f"{120 - 115 * v / top:.1f}" for at, v in values)

    return DayChart(points([(m.at, m.puts) for m in minutes]),
                    points([(m.at, m.deletes) for m in minutes]), top)


def group_key(error: str, reason: str, location: str = "") -> str:
    """A failed-jobs group (``FailedGroup.key``) as one form value (URL-safe base64 of
    JSON): the reason may hold newlines, which a form's hidden input would not carry
    unchanged. Small: error, reason and location are capped when kept (MESSAGE_LIMIT), and
    a group with a location carries no reason."""
    return base64.urlsafe_b64encode(json.dumps([error, reason, location]).encode()).decode()


def group_from_key(key: str) -> tuple[str, str, str]:
    """(error, reason, location) of :func:`group_key`'s value (a key of an older page,
    without a location, too); ValueError if it is not one."""
    try:
        parts = json.loads(base64.urlsafe_b64decode(key.encode()))
    except (ValueError, TypeError, binascii.Error):
        raise ValueError("not a failed-jobs group") from None
    if not isinstance(parts, list) or len(parts) not in (2, 3) \
            or not all(isinstance(p, str) for p in parts):
        raise ValueError("not a failed-jobs group")
    error, reason, location = (*parts, "") if len(parts) == 2 else parts
    return error, reason, location


def make_env() -> jinja2.Environment:
    """The template environment: package templates, autoescape on, strict undefineds."""
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("sqlq.dashboard", "templates"),
        autoescape=True, undefined=jinja2.StrictUndefined,
        trim_blocks=True, lstrip_blocks=True)
    env.filters.update(stamp=stamp, preview=preview, duration=format_duration,
                       last_line=last_line)
    env.globals.update(age=age, until=until, tube_url=tube_url, quantiles=quantiles)
    return env


class Progress(NamedTuple):
    """A job's progress as the job page shows it (``Job.progress``)."""

    value: int | float
    message: str
    #: The fraction done for a progress bar (None: a count, which has no end).
    fraction: float | None
    text: str


def steps(queue: Any, job_id: int) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The job's finished steps and saved cursors (sqlq/steps.py), each value as JSON
    text cut to a line's worth for the page."""
    from ..steps import rows_as_dicts

    return shown_steps(*rows_as_dicts(queue.views.steps(job_id)))


def shown_steps(done: list[dict[str, Any]], cursors: list[dict[str, Any]]
                ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Steps and cursors (a live job's, a finished record's), copies with each value as
    JSON text cut to a line's worth for the page."""
    def shown(row: dict[str, Any]) -> dict[str, Any]:
        text = json.dumps(row["value"])
        return {**row, "shown": text if len(text) <= 200 else text[:200] + " …"}

    return [shown(r) for r in done], [shown(r) for r in cursors]


def progress(queue: Any, job_id: int) -> Progress | None:
    """What the job reported of its progress (stats_job), or None: none yet, or gone."""
    try:
        stats = queue.views.stats_job(job_id)
    except JobNotFound:
        return None
    value = stats.get("progress", "")
    if value == "":
        return None
    fraction = value if isinstance(value, float) else None
    text = f"{value:.0%}" if fraction is not None else str(value)
    return Progress(value, str(stats.get("progress-message", "")), fraction, text)
