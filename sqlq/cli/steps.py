"""``sqlq step NAME -- COMMAND``: a durable step of a shell job (issue 40, sqlq/steps.py).

``sqlq work -- COMMAND`` gives its command ``SQLQ_JOB_ID`` and ``SQLQ_LEASE``; a script
wraps each step in ``sqlq step``, so a run after a crash or a retry skips the steps an
earlier run finished. At least once per step: a crash between COMMAND's exit and the
record runs it again.
"""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import click

from sqlq.steps import MAX_STEPS, STEP, check_name, encode, rows_as_dicts

from .group import cli
from .options import queue_from_ctx


@cli.command()
@click.argument("name")
@click.argument("command", nargs=-1, type=click.UNPROCESSED,
                metavar="-- COMMAND [ARGS]...")
@click.option("--job", "job_id", type=int, envvar="SQLQ_JOB_ID", show_envvar=True,
              help="The job whose step this is.  [default: $SQLQ_JOB_ID, set by sqlq work]")
@click.option("--lease", type=int, envvar="SQLQ_LEASE", show_envvar=True,
              help="Its reservation's lease.  [default: $SQLQ_LEASE, set by sqlq work]")
@click.option("--capture", is_flag=True,
              help="Keep COMMAND's stdout as the step's value and print it; a skipped step "
                   "prints the kept one.")
@click.pass_context
def step(ctx: click.Context, name: str, command: tuple[str, ...], job_id: int | None,
         lease: int | None, capture: bool) -> None:
    """Run COMMAND once per job as its step NAME: skipped when the job has it already.

    Under `sqlq work -- SCRIPT`, the job's earlier runs (after a crash, a retry, a
    snooze) recorded each step whose COMMAND exited 0; this run skips those. COMMAND's
    exit status is this command's; a step is recorded only under the job's live
    lease (exit 1 if it was lost: nothing recorded).

    Example:

    \b
        sqlq step download -- curl -fsS -o data.csv "$URL"
        sqlq step load -- psql -f load.sql
    """
    checked = check_name(name)
    if not command:
        raise click.UsageError("give the step's COMMAND after --")
    if job_id is None or lease is None:
        raise click.UsageError("no job: run it under sqlq work -- COMMAND (which sets "
                               "SQLQ_JOB_ID and SQLQ_LEASE), or give --job and --lease")
    queue = queue_from_ctx(ctx, create=False)
    for kind, done, value, _ in queue.views.steps(job_id):
        if kind == STEP and done == checked:
            if capture:
                kept = json.loads(value)
                sys.stdout.write(kept if isinstance(kept, str) else "")
            return
    run = subprocess.run(command, stdout=subprocess.PIPE if capture else None, check=False)
    if run.returncode != 0:
        ctx.exit(run.returncode if run.returncode > 0 else 128 - run.returncode)
    output = run.stdout.decode(errors="replace") if capture else None
    queue.verbs.record_step(job_id, lease, STEP, checked, encode(output, checked), MAX_STEPS)
    if output:
        sys.stdout.write(output)


def steps_record(rows: list[tuple[int, str, str, int]]) -> dict[str, Any]:
    """``sqlq peek --json``'s ``steps`` and ``cursors`` of a job (``Views.steps``' rows)."""
    steps, cursors = rows_as_dicts(rows)
    return {"steps": steps, "cursors": cursors}


def steps_text(rows: list[tuple[int, str, str, int]]) -> str:
    """``sqlq peek``'s lines for a job's steps and cursors ('' for none): each finished
    step with when it finished (UTC), each cursor with its value."""
    return steps_lines(*rows_as_dicts(rows))


def steps_lines(steps: list[dict[str, Any]], cursors: list[dict[str, Any]]) -> str:
    """steps_text of steps and cursors as dicts (rows_as_dicts', a finished record's)."""
    import datetime

    from ..core.display import display_text

    def when(ms: int) -> str:
        at = datetime.datetime.fromtimestamp(ms / 1000, datetime.timezone.utc)
        return at.strftime("%Y-%m-%d %H:%M:%S UTC")

    lines = [f"step {display_text(s['name'])}: done {when(s['finished_at'])}" for s in steps]
    lines += [f"cursor {display_text(c['name'])}: {display_text(json.dumps(c['value']))[:200]}"
              for c in cursors]
    return "\n".join(lines)
