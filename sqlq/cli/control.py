"""Commands that control running jobs (issue 25): ``sqlq cancel`` and ``sqlq progress``,
and how ``sqlq peek`` shows a job's progress (:func:`progress_text`)."""

from __future__ import annotations

from typing import Any

import click

import sqlq
from sqlq.control import Progress, check_progress

from ..core.display import display_text
from .group import cli
from .options import Checked, job_id_argument, json_option, queue_from_ctx
from .output import emit


def parse_progress(text: str) -> int | float:
    """A progress value from the command line: ``37`` (a count), ``0.5`` or ``50%``.

    ASCII only, without ``_``: ``float()`` alone would take ``٣`` or ``５０%``."""
    text = text.strip()
    if not text.isascii() or "_" in text:
        raise ValueError(f"{text!r} is not a count, a fraction or a percentage")
    try:
        value: int | float = float(text[:-1]) / 100 if text.endswith("%") else \
            int(text) if text.isdigit() else float(text)
    except ValueError:
        raise ValueError(f"{text!r} is not a count, a fraction or a percentage") from None
    check_progress(value, None)
    return value


def progress_text(value: Progress, message: str) -> str:
    """A job's progress for people: ``50% halfway``, ``37 halfway`` ('' before any)."""
    if value is None:
        return ""
    shown = f"{value:.0%}" if isinstance(value, float) else str(value)
    return f"{shown} {display_text(message)}".rstrip()


def progress_of(queue: sqlq.Queue, job_id: int) -> dict[str, Any] | None:
    """{"progress", "progress_message"} of a live job, or None (never set, or gone)."""
    try:
        stats = queue.stats_job(job_id)
    except sqlq.JobNotFound:
        return None
    if stats["progress"] == "":
        return None
    return {"progress": stats["progress"], "progress_message": stats["progress-message"]}


@cli.command()
@job_id_argument
@json_option
@click.pass_context
def cancel(ctx: click.Context, job_id: int, as_json: bool) -> None:
    """Cancel a job: it will not run (again).

    A ready, delayed, buried or waiting job is deleted. A reserved one is deleted too,
    and its worker stops it within about a second (`sqlq work` kills a command, cancels
    an async task, tells a function at its next sqlq.current_job()). Exit 3 if no such
    job is live.

    Example:

    \b
        sqlq cancel 42
    """
    queue_from_ctx(ctx, create=False).cancel(job_id, by="cli")
    emit({"id": job_id, "cancelled": True}, as_json, text=f"cancelled job {job_id}")


@cli.command()
@job_id_argument
@click.argument("value", type=Checked("progress", parse_progress))
@click.option("--message", "-m", help="A short line shown with it (1024 characters at most).")
@json_option
@click.pass_context
def progress(ctx: click.Context, job_id: int, value: int | float, message: str | None,
             as_json: bool) -> None:
    """Say how far a reserved job has got: VALUE a count (37), a fraction (0.5) or 50%.

    For a COMMAND run by `sqlq work`, which finds its job's id in $SQLQ_JOB_ID. Shown
    by `sqlq peek`, `stats-job` and the dashboard.

    Example:

    \b
        sqlq progress "$SQLQ_JOB_ID" 50% --message 'resized 2 of 4'
    """
    queue_from_ctx(ctx, create=False).progress(job_id, value, message)
    emit({"id": job_id, "progress": value, "progress_message": message or ""}, as_json,
         text=f"job {job_id}: {progress_text(value, message or '')}")
