"""``sqlq work``: the command that runs jobs (the workers live in :mod:`sqlq.work`)."""

from __future__ import annotations

import click

from .group import cli
from .options import DURATION, PREFETCH, may_fork, tubes_option


@cli.command(context_settings={"allow_interspersed_args": False})
@click.option("--import", "-i", "imports", multiple=True, metavar="MODULE",
              help="A module that declares @q.task functions; repeat for several.")
@tubes_option
@click.option("--processes", "-n", type=click.IntRange(min=1), default=1, show_default=True,
              help="Worker processes, under a supervisor that restarts crashed ones.")
@click.option("--concurrency", "-c", type=click.IntRange(min=1), default=1, show_default=True,
              help="Jobs each worker process runs at once, on an event loop (where async "
              "def tasks always run; plain functions among them run in threads).")
@click.option("--prefetch", type=PREFETCH, default="auto", show_default=True,
              help="Jobs claimed per commit; finished ones are deleted with the next claim. "
              "auto: about 20 ms of work per claim by measured run times, from 1 (at start, "
              "and for jobs of 20 ms or more) to 64; 1: one job at a time. Jobs held in a "
              "batch are touched before 80% of their TTR passes; on SIGTERM a batch that "
              "should take over 1 s (or --grace) is released at once. With --concurrency "
              "N a claim fills the free slots plus this many less one, and SIGTERM "
              "releases the jobs waiting in the batch at once.")
@click.option("--burst", is_flag=True, help="Exit when no job is ready (delayed ones are "
              "not waited for).")
@click.option("--retries", type=click.IntRange(min=0), default=3, show_default=True,
              help="Runs after a failed first one, for COMMAND (a task sets its own).")
@click.option("--backoff", type=DURATION, default="1s", show_default=True,
              help="Wait before COMMAND's first retry; doubles, with jitter, each time.")
@click.option("--grace", type=DURATION, default="30s", show_default=True,
              help="On SIGTERM/SIGINT, let running jobs finish this long, then release them.")
@click.option("--keepalive", is_flag=True,
              help="Touch COMMAND's job at 80% of its TTR instead of killing it at the TTR.")
@click.option("--log-level", type=click.Choice(["DEBUG", "INFO", "WARNING", "ERROR"],
              case_sensitive=False), default="INFO", show_default=True)
@click.option("--log-format", type=click.Choice(["text", "json"]), default="text",
              show_default=True, help="json: one object per line (job, tube, task, outcome...).")
@click.option("--durability", type=click.Choice(["full", "normal"]), default="full",
              show_default=True, help="normal: deletes are not fsynced (about 3x the jobs/s).")
@click.option("--init", is_flag=True,
              help="Create the database if it does not exist, or add sqlq's tables to "
              "another application's (as Queue(init=True)). Without it a worker refuses a "
              "missing file: a typo in --db would wait on a new, empty queue for ever.")
@click.option("--in-process", is_flag=True, hidden=True,
              help="Be one worker, without a supervisor (how a supervisor starts its own).")
@click.argument("command", nargs=-1, type=click.UNPROCESSED, metavar="[-- COMMAND ARGS...]")
@click.pass_context
def work(ctx: click.Context, imports: tuple[str, ...], tubes: tuple[str, ...], processes: int,
         concurrency: int, prefetch: int | None, burst: bool, retries: int, backoff: float,
         grace: float, keepalive: bool,
         log_level: str, log_format: str, durability: str, init: bool, in_process: bool,
         command: tuple[str, ...]) -> None:
    """Run jobs: task functions from --import modules, or COMMAND once per job.

    Tasks are dispatched by the name in the job's body; a failure is retried with
    exponential backoff, then buried with the error (see 'sqlq peek --buried').
    COMMAND gets the body on stdin and SQLQ_JOB_ID, SQLQ_TUBE, SQLQ_ATTEMPT in its
    environment; exit 0 deletes the job, anything else retries then buries it, and
    it is killed when its TTR runs out (unless --keepalive). Without --db, a task
    worker uses the file its tasks' Queue opened; a missing file is refused unless
    --init is given. SIGTERM or Ctrl-C: stop reserving,
    finish running jobs within --grace, release the rest, exit 0. A warning is
    logged when another transaction holds back the cleanup of deleted jobs longer
    than $SQLQ_WARN_HORIZON_AGE (5m), or the SQLite -wal file outgrows
    $SQLQ_WARN_WAL_SIZE (256M); see the docs' Long transactions page.

    Example:

    \b
        sqlq work --import myapp.tasks --processes 4
        sqlq --db jobs.db work --tube thumbs -- ./make-thumbnail.sh
    """
    from sqlq.work import WorkConfig, run

    root = ctx.find_root()
    source = root.get_parameter_source("db_path")
    given = source is not None and source.name != "DEFAULT"
    config = WorkConfig(
        db=root.params["db_path"] if given else None, imports=imports, tubes=tubes,
        command=command, processes=processes, concurrency=concurrency, prefetch=prefetch,
        burst=burst,
        retries=retries, backoff=backoff,
        grace=grace, keepalive=keepalive, log_level=log_level.upper(), log_format=log_format,
        durability=durability, init=init, in_process=in_process,
        fork=may_fork(ctx))
    ctx.exit(run(config))
