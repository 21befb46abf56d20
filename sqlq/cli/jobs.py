"""Commands on jobs: reserve them, act on one by id, look at one (putting them: puts.py)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import click

import sqlq
from sqlq.core.durations import format_duration

from ..core.display import display_text
from .group import cli
from .options import (
    DURATION,
    TUBE,
    delay_option,
    job_id_argument,
    json_option,
    priority_option,
    queue_from_ctx,
    raw_option,
    tube_option,
    tubes_option,
)
from .output import attempts_text, emit, job_record, job_text, links_rows


@cli.command()
@tubes_option
@click.option("--timeout", type=DURATION, default=None,
              help="Give up after this long (exit 4); 0 means do not wait.  [default: forever]")
@click.option("--id-only", is_flag=True, help="Print only the job's id.")
@raw_option
@json_option
@click.pass_context
def reserve(ctx: click.Context, tubes: Sequence[str], timeout: float | None, id_only: bool,
            raw: bool, as_json: bool) -> None:
    """Reserve the most urgent ready job and show it.

    Waits for one, or exits with code 4 once --timeout has passed. The job stays
    reserved for its TTR after sqlq exits: delete, release or bury it by id. Plain
    output escapes what is not printable text in the body; --raw writes only the
    exact body bytes; --id-only only the id, for scripts.

    Example:

    \b
        id=$(sqlq reserve --tube thumbs --timeout 30s --id-only) && sqlq peek "$id" --raw
    """
    watched = list(tubes) or ["default"]
    # detach: this process exits at once, the reservation must outlive it (for its TTR).
    job = queue_from_ctx(ctx).reserve(watched, timeout=timeout, detach=True)
    if job is None:
        waited = f"within {format_duration(timeout)}" if timeout else "now"
        raise sqlq.Timeout(f"no job ready {waited} in tube {', '.join(watched)}")
    emit(job, as_json, raw=raw, text=str(job.id) if id_only else None)


@cli.command()
@job_id_argument
@json_option
@click.pass_context
def delete(ctx: click.Context, job_id: int, as_json: bool) -> None:
    """Delete a job by id, in any state (exit 3 if there is none).

    Example:

    \b
        sqlq delete 42
    """
    queue_from_ctx(ctx, create=False).delete(job_id, by="cli")
    emit({"id": job_id, "deleted": True}, as_json, text=f"deleted job {job_id}")


@cli.command()
@job_id_argument
@priority_option(None)
@delay_option
@json_option
@click.pass_context
def release(ctx: click.Context, job_id: int, priority: int | None, delay: float,
            as_json: bool) -> None:
    """Put a reserved job back: ready, or delayed with --delay.

    Example:

    \b
        sqlq release 42 --delay 30s --priority 10
    """
    queue_from_ctx(ctx, create=False).release(job_id, priority=priority, delay=delay)
    state = f"delayed {format_duration(delay)}" if delay else "ready"
    emit({"id": job_id, "released": True}, as_json, text=f"released job {job_id} ({state})")


@cli.command()
@job_id_argument
@priority_option(None)
@click.option("--reason", "-r", help="Why: shown by peek and stats.")
@json_option
@click.pass_context
def bury(ctx: click.Context, job_id: int, priority: int | None, reason: str | None,
         as_json: bool) -> None:
    """Bury a reserved job: park it until someone kicks it.

    Example:

    \b
        sqlq bury 42 --reason 'bad input: no address'
    """
    queue_from_ctx(ctx, create=False).bury(job_id, priority=priority, reason=reason)
    emit({"id": job_id, "buried": True}, as_json, text=f"buried job {job_id}")


@cli.command()
@click.argument("bound", type=click.IntRange(min=0))
@tube_option
@json_option
@click.pass_context
def kick(ctx: click.Context, bound: int, tube: str, as_json: bool) -> None:
    """Kick up to BOUND buried jobs to ready (if none, delayed ones).

    Example:

    \b
        sqlq kick 100 --tube emails
    """
    count = queue_from_ctx(ctx, create=False).kick(bound, tube=tube)
    emit({"kicked": count}, as_json, text=f"kicked {count} job{'s' * (count != 1)}")


@cli.command()
@job_id_argument
@click.argument("delay", type=DURATION)
@json_option
@click.pass_context
def postpone(ctx: click.Context, job_id: int, delay: float, as_json: bool) -> None:
    """Make a ready or delayed job wait DELAY from now (0 makes it ready now).

    Example:

    \b
        sqlq postpone 42 1h
    """
    queue_from_ctx(ctx, create=False).postpone(job_id, delay)
    state = f"delayed {format_duration(delay)}" if delay else "ready"
    emit({"id": job_id, "postponed": True}, as_json, text=f"postponed job {job_id} ({state})")


@cli.command("kick-job")
@job_id_argument
@json_option
@click.pass_context
def kick_job(ctx: click.Context, job_id: int, as_json: bool) -> None:
    """Kick one buried or delayed job by id to ready.

    Example:

    \b
        sqlq kick-job 42
    """
    queue_from_ctx(ctx, create=False).kick_job(job_id)
    emit({"id": job_id, "kicked": True}, as_json, text=f"kicked job {job_id}")


@cli.command()
@job_id_argument
@json_option
@click.pass_context
def touch(ctx: click.Context, job_id: int, as_json: bool) -> None:
    """Give a reserved job a fresh TTR, so a slow worker keeps it.

    Example:

    \b
        sqlq touch 42
    """
    queue_from_ctx(ctx, create=False).touch(job_id)
    emit({"id": job_id, "touched": True}, as_json, text=f"touched job {job_id}")


@cli.command()
@click.argument("job_id", metavar="[ID]", required=False, type=click.IntRange(min=1))
@click.option("--ready", "which", flag_value="ready", help="The next job to be reserved.")
@click.option("--delayed", "which", flag_value="delayed", help="The delayed job due first.")
@click.option("--buried", "which", flag_value="buried", help="The oldest buried job.")
@click.option("--tube", "-t", type=TUBE, default=None,
              help="Look in this tube only.  [default: every tube]")
@raw_option
@json_option
@click.pass_context
def peek(ctx: click.Context, job_id: int | None, which: str | None, tube: str | None, raw: bool,
         as_json: bool) -> None:
    """Show a job by ID, or the next --ready/--delayed/--buried one.

    The job is not reserved. Without --tube, --ready/--delayed/--buried look in every
    tube: the job the next reserve of all of them would get, the delayed job due first,
    the oldest buried job. Exit 3 if there is no such job. A job put with --after
    shows the jobs it still waits for, and a job others wait for lists them (all of
    them in --json: parents, children). A job that failed under `sqlq work` also shows
    its failed runs and the traceback of the latest, one that reported progress
    (job.progress, sqlq progress) its last, and one with durable steps (job.step,
    sqlq step) each finished step and each saved cursor. A job that ended is not found
    (exit 3), and the message says how it ended ("done 2026-12-05 14:02:11 UTC after 3
    attempts, 1.2 s", "cancelled ... by the dashboard"; with --json its record on stdout)
    while its record is kept; its steps and cursors, if it had any, on stdout.

    Example:

    \b
        sqlq peek 42
        sqlq peek --buried
        sqlq peek --buried --tube emails --json
    """
    if (job_id is None) == (which is None):
        raise click.UsageError("give a job ID or one of --ready, --delayed, --buried")
    queue = queue_from_ctx(ctx, create=False)
    if job_id is not None:
        job, missing = queue.peek(job_id), f"job {job_id} not found"
    elif tube is not None:
        job, missing = getattr(queue, f"peek_{which}")(tube), f"no {which} job in tube {tube}"
    else:
        job, missing = peek_every_tube(queue, str(which)), f"no {which} job in any tube"
    if job is None:
        if job_id is not None:
            missing = finished_text(queue, job_id, as_json) or missing
        raise sqlq.JobNotFound(missing)
    if raw:
        emit(job, raw=True)
        return
    attempts = queue.attempts(job.id)  # failed runs kept by sqlq work, with tracebacks
    try:
        links = queue.links(job.id)
    except sqlq.JobNotFound:  # gone since the peek: it no longer waits, nor is waited for
        links = sqlq.Links([], [])
    from .control import progress_of, progress_text  # peek's only: not every command's

    progress = progress_of(queue, job.id)  # what Job.progress said, if anything
    from .steps import steps_record, steps_text

    steps = queue.views.steps(job.id)  # what its runs finished (sqlq/steps.py)
    if as_json:
        import dataclasses  # this reply's only: not every command's

        emit({**job_record(job), **(progress or {}), "parents": links.parents,
              "children": links.children,
              "attempts": [dataclasses.asdict(a) for a in attempts], **steps_record(steps)},
             True)
        return
    emit(job, text=job_text(job, links_rows(links)))
    if progress is not None:
        click.echo(f"progress: {progress_text(progress['progress'], progress['progress_message'])}")
    if steps:
        click.echo(steps_text(steps))
    if attempts:
        click.echo(attempts_text(attempts))


def finished_text(queue: sqlq.Queue, job_id: int, as_json: bool) -> str | None:
    """A peek of a job that is not live: its record's line for the error ("job 42 not
    found: done 2026-12-05 14:02:11 UTC after 3 attempts, 1.2 s"), the record itself on
    stdout with --json; None if it left none (never put, or pruned). The exit code stays
    3: the job is not found, as beanstalkd's peek says."""
    record = queue.finished(job_id)
    if record is None:
        return None
    if as_json:
        emit({"finished": record.as_dict()}, True)
    elif record.steps or record.cursors:  # what its runs finished, kept on the record
        from .steps import steps_lines

        click.echo(steps_lines(record.steps, record.cursors))
    return f"job {job_id} not found: {record.describe()}"


#: How each peek kind orders its candidates from several tubes, as each orders one tube's:
#: the next reserve takes the most urgent, then the oldest; delayed jobs come due in turn.
PEEK_ORDER: dict[str, Callable[[sqlq.Job], tuple[int, int]]] = {
    "ready": lambda j: (j.priority, j.id),
    "delayed": lambda j: (j.delay_until or 0, j.id),
    "buried": lambda j: (0, j.id),
}


def peek_every_tube(queue: sqlq.Queue, which: str) -> sqlq.Job | None:
    """The --ready/--delayed/--buried job of all tubes: each tube's, then the first of
    those by the order a single tube uses. The tubes listed are those holding jobs, so a
    user who buried a job in tube thumbs finds it with a bare ``sqlq peek --buried``."""
    peek_one = getattr(queue, f"peek_{which}")
    found = [job for job in (peek_one(tube) for tube in queue.tubes()) if job is not None]
    return min(found, key=PEEK_ORDER[which], default=None)


@cli.command()
@job_id_argument
@click.option("--timeout", type=DURATION, default=None,
              help="Give up after this long (exit 4); 0 means do not wait.  [default: forever]")
@raw_option
@json_option
@click.pass_context
def result(ctx: click.Context, job_id: int, timeout: float | None, raw: bool,
           as_json: bool) -> None:
    """Wait for job ID's result and print it (a task's result is JSON).

    Exit 4 on timeout, 3 if the job has no result (never put, deleted without one, or
    expired), 1 if it was buried (the reason on stderr). Results can be read again
    until they expire.

    Example:

    \b
        id=$(sqlq put '{"n": 7}' --tube squares) && sqlq result "$id" --timeout 30s --raw
    """
    data = queue_from_ctx(ctx, create=False).result(job_id, timeout=timeout)
    if raw:
        click.echo(data, nl=False)
        return
    try:
        record = {"id": job_id, "result": data.decode(), "result_encoding": "utf-8"}
    except UnicodeDecodeError:
        import base64  # binary results only

        record = {"id": job_id, "result": base64.b64encode(data).decode("ascii"),
                  "result_encoding": "base64"}
    emit(record, as_json, text=display_text(data))
