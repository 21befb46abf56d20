"""How the ``sqlq`` command prints: one path for plain text, ``--json`` and ``--raw``.

Plain output shows printable UTF-8 as it is and escapes the rest (``\\xNN``) so a
binary body cannot garble or drive the terminal; ``--raw`` writes the exact bytes and
nothing else; ``--json`` gives ``body`` as text (``"body_encoding": "utf-8"``) or base64
(``"base64"``), one object per line for lists.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import IO, Any

import click

import sqlq
from sqlq.core.display import display_text
from sqlq.core.durations import format_duration, now_ms

_JOB_FIELDS = ("id", "tube", "state", "priority", "ttr", "reserves", "timeouts", "releases",
               "buries", "kicks", "created_at", "delay_until", "reserved_until", "bury_reason",
               "unique_key", "group")


def job_record(job: sqlq.Job) -> dict[str, Any]:
    """A Job as a JSON-ready dict; the body is UTF-8 text or base64, per ``body_encoding``."""
    record = {key: getattr(job, key, None) for key in _JOB_FIELDS}
    try:
        record.update(body=job.body.decode("utf-8"), body_encoding="utf-8")
    except UnicodeDecodeError:
        import base64  # binary bodies only

        record.update(body=base64.b64encode(job.body).decode("ascii"), body_encoding="base64")
    record["body_size"] = len(job.body)
    return record


#: Ids of a job's parents or children that the plain ``peek`` lists (``--json`` has all).
SHOWN_LINKS = 20


def links_rows(links: sqlq.Links) -> list[tuple[str, str]]:
    """``waits for`` and ``waited on by`` rows for ``sqlq peek``: the jobs a waiting job
    still waits for and those waiting for it (none: no row)."""

    def ids(found: list[int]) -> str:
        more = len(found) - SHOWN_LINKS
        return " ".join(map(str, found[:SHOWN_LINKS])) + (f" ... ({more} more)" if more > 0
                                                          else "")

    return [(key, ids(found)) for key, found in (("waits for", links.parents),
                                                 ("waited on by", links.children)) if found]


def job_text(job: sqlq.Job, extra: Iterable[tuple[str, str]] = ()) -> str:
    """A job for people: its fields (``extra`` rows before the body's size), then its body."""
    return _aligned(_job_rows(job, extra)) + "\n" + display_text(job.body)


def _job_rows(job: sqlq.Job, extra: Iterable[tuple[str, str]] = ()
              ) -> Iterable[tuple[str, str]]:
    """The fields a person wants to see about a job, in reading order."""
    now = now_ms()

    def since(ms: int | None, sign: int = 1) -> str:
        return format_duration(max(0, sign * (now - (ms or now))) / 1000)

    yield from (("id", str(job.id)), ("tube", job.tube), ("state", job.state),
                ("priority", str(job.priority)), ("ttr", format_duration(job.ttr)),
                ("age", since(job.created_at)))
    if job.state == "delayed":
        yield "ready in", since(job.delay_until, -1)
    if job.state == "reserved":
        yield "time left", since(job.reserved_until, -1)
    yield "counters", " ".join(f"{k}={getattr(job, k)}" for k in _JOB_FIELDS[5:10])
    if job.bury_reason:
        yield "reason", display_text(job.bury_reason)
    if job.unique_key:
        yield "unique key", display_text(job.unique_key)
    if job.group is not None:
        yield "group", display_text(job.group)
    yield from extra
    binary = job_record(job)["body_encoding"] != "utf-8"
    yield "body", f"({len(job.body)} bytes{', binary' if binary else ''})"


def attempts_text(attempts: list[sqlq.Attempt]) -> str:
    """A job's kept failed runs, one line each, then the traceback of the latest (for
    ``sqlq peek``); empty for none."""
    if not attempts:
        return ""
    lines = [f"attempts: {len(attempts)} failed run{'s' * (len(attempts) != 1)} kept, "
             "oldest first"]
    for a in attempts:
        when = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(a.started_at / 1000)) + "Z"
        where = f"  (at {display_text(a.location, None)})" if a.location else ""
        lines.append(f"  #{a.attempt}  {when}  ran {format_duration(a.duration)}  "
                     f"{a.outcome}  {a.host}[{a.pid}]  {display_text(a.message, None)}{where}")
    last = attempts[-1]
    if last.traceback:
        lines.append(f"traceback of attempt {last.attempt}:")
        lines.append(display_text(last.traceback, None))
    return "\n".join(lines)


def _aligned(rows: Iterable[tuple[str, str]]) -> str:
    """``key:  value`` lines with the values in one column."""
    rows = list(rows)
    width = max((len(k) for k, _ in rows), default=0) + 3
    return "\n".join(f"{key}:".ljust(width) + value.replace("\n", "\n" + " " * width)
                     for key, value in rows)


def emit(value: Any, as_json: bool = False, *, raw: bool = False, text: str | None = None) -> None:
    """Print a command's result: the one output path of every command.

    Args:
        value: a Job, a mapping, a list of either, or a scalar.
        as_json: print JSON; a list prints one object per line (JSON Lines).
        raw: write exactly the bodies of Jobs to stdout, and nothing else.
        text: what to print for people instead of the generic rendering of ``value``.
    """
    items = value if isinstance(value, list) else [value]
    if raw:
        out: IO[bytes] = sys.stdout.buffer
        for item in items:
            out.write(item.body if isinstance(item, sqlq.Job) else str(item).encode())
        out.flush()
    elif as_json:
        import json  # --json only

        for item in items:
            record = job_record(item) if isinstance(item, sqlq.Job) else item
            click.echo(json.dumps(record, ensure_ascii=False, default=str))
    elif text is not None:
        click.echo(text)
    else:
        for item in items:
            if isinstance(item, sqlq.Job):
                click.echo(job_text(item))
            elif isinstance(item, Mapping):
                click.echo(_aligned((str(k), display_text(str(v))) for k, v in item.items()))
            else:
                click.echo(display_text(str(item)))


class IdRuns:
    """Ids in the order they came, held as runs of consecutive ids (``put-many``'s: a
    transaction's ids mostly follow each other), so ten million of them take a few
    bytes, not hundreds of megabytes."""

    def __init__(self) -> None:
        self.runs: list[list[int]] = []  # [first, last]
        self.count = 0

    def extend(self, ids: Sequence[int]) -> None:
        """Add the ids of one put_many, which ascend: first to last without a gap is one
        run, added in one step."""
        if ids and ids[-1] - ids[0] == len(ids) - 1:
            self._add(ids[0], ids[-1])
        else:
            for i in ids:
                self._add(i, i)
        self.count += len(ids)

    def _add(self, first: int, last: int) -> None:
        if self.runs and self.runs[-1][1] == first - 1:
            self.runs[-1][1] = last
        else:
            self.runs.append([first, last])

    def __len__(self) -> int:
        return self.count

    def __iter__(self) -> Iterator[int]:
        for first, last in self.runs:
            yield from range(first, last + 1)


def emit_ids(ids: IdRuns, as_json: bool) -> None:
    """Print ids as ``emit`` prints a list of ``{"id": ...}``: one per line, as a number
    or a JSON object; written in blocks, never built whole."""
    out = sys.stdout
    block: list[str] = []
    for i in ids:
        block.append(f'{{"id": {i}}}' if as_json else str(i))
        if len(block) == 10_000:
            out.write("\n".join(block) + "\n")
            block.clear()
    if block:
        out.write("\n".join(block) + "\n")
    out.flush()
