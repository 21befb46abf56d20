"""Commands on the whole queue: its counters, tubes and pauses, housekeeping, copies."""

from __future__ import annotations

import click

from sqlq.backends import redact
from sqlq.core.durations import format_duration

from .group import cli
from .options import DURATION, TUBE, json_option, queue_from_ctx
from .output import emit
from .progress import bar, quiet_option


@cli.command()
@click.option("--tube", "-t", type=TUBE, help="Statistics of this tube.")
@click.option("--job", "-j", "job_id", type=click.IntRange(min=1), metavar="ID",
              help="Statistics of this job.")
@json_option
@click.pass_context
def stats(ctx: click.Context, tube: str | None, job_id: int | None, as_json: bool) -> None:
    """Show the counters of the file, of one --tube or of one --job.

    The keys are beanstalkd's (current-jobs-ready, total-jobs, ...). A tube with no
    jobs (drained, or never used) shows zeros: it is not an error.

    Example:

    \b
        sqlq stats --tube emails --json
    """
    if tube is not None and job_id is not None:
        raise click.UsageError("give --tube or --job, not both")
    queue = queue_from_ctx(ctx, create=False)
    if job_id is not None:
        doc = queue.stats_job(job_id)
        if not as_json:  # one line each: the steps' names, the cursors' values
            import json

            doc = {**doc, "steps": ", ".join(s["name"] for s in doc["steps"]),
                   "cursors": ", ".join(f"{c['name']}={json.dumps(c['value'])}"
                                        for c in doc["cursors"])}
        emit(doc, as_json)
        return
    emit(queue.stats_tube(tube) if tube is not None else queue.stats(), as_json)


@cli.command()
@json_option
@click.pass_context
def tubes(ctx: click.Context, as_json: bool) -> None:
    """List the tubes that hold jobs (or are paused or subscribed to a topic), one per line.

    Example:

    \b
        sqlq tubes --json
    """
    names = queue_from_ctx(ctx, create=False).tubes()
    emit([{"name": name} for name in names], as_json, text="\n".join(names) or None)


@cli.command()
@click.argument("tube", type=TUBE)
@click.argument("duration", type=DURATION)
@json_option
@click.pass_context
def pause(ctx: click.Context, tube: str, duration: float, as_json: bool) -> None:
    """Stop reserves from TUBE for DURATION (0 un-pauses it).

    Example:

    \b
        sqlq pause emails 10m
    """
    queue_from_ctx(ctx, create=False).pause_tube(tube, duration)
    text = f"paused tube {tube} for {format_duration(duration)}" if duration else None
    emit({"tube": tube, "paused": duration}, as_json, text=text or f"unpaused tube {tube}")


@cli.command()
@quiet_option
@json_option
@click.pass_context
def maintain(ctx: click.Context, quiet: bool, as_json: bool) -> None:
    """Housekeeping, and what holds it back: prune what retention lets go, then on a
    file, checkpoint the WAL and check the file; on PostgreSQL, vacuum the jobs table
    and report dead rows and the oldest snapshot holding the database's horizon (a
    transaction, a prepared one, a replication slot or a standby: it keeps deleted
    jobs around).

    The prune deletes the finished records and results past their retention, as
    workers do once a minute: a queue worked without `sqlq work` runs this from cron.
    On a terminal, stderr shows its steps as a bar, unless --quiet.

    Example:

    \b
        sqlq --db postgresql://app@db/app maintain
    """
    queue = queue_from_ctx(ctx, create=False)
    with bar("maintaining", "steps", quiet=quiet, done="maintained", rate=False) as shown:
        pruned = queue.prune()  # first: the checkpoint or vacuum after it sees the space
        report = queue.backend.maintain(shown)
    emit({"pruned-finished": pruned["finished"], "pruned-results": pruned["results"],
          **report}, as_json)


@cli.command("copy")
@click.argument("source")
@click.argument("target")
@quiet_option
@json_option
def copy_command(source: str, target: str, quiet: bool, as_json: bool) -> None:
    """Copy every live job and all queue state from SOURCE to TARGET (a file or a
    postgresql:// URL): states, priorities, delays, counters, unique keys, pauses,
    results, subscriptions, periodic slots, and the id counter. TARGET must be new
    or empty; it is written in one transaction. Stop the workers first: a reserved
    job is copied as ready. It reads and writes 500 jobs at a time, so its memory
    does not grow with the queue; on a terminal, stderr shows a progress bar (jobs
    copied, their rate, the time left), unless --quiet.

    Example:

    \b
        sqlq copy app.db postgresql://app@db.internal/app
    """
    from sqlq.copy import copy

    with bar("copying", "jobs", quiet=quiet, done="copied") as shown:
        report = copy(source, target, progress=shown)
    emit({**report.counts, "total-jobs": report.total_jobs}, as_json)
    if not as_json:  # the table says what; this line says from where to where
        jobs = report.total_jobs
        click.echo(f"copied {jobs} job{'s' * (jobs != 1)} and the queue's state from "
                   f"{redact(source)} to {redact(target)}")
