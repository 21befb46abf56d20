"""Commands that watch or serve the queue: top, the beanstalkd server, the dashboard
and /metrics."""

from __future__ import annotations

import os
import sys
from typing import IO, Any

import click

import sqlq

from .group import cli
from .options import DURATION, db_location, may_fork, queue_from_ctx


@cli.command()
@click.option("--interval", "-i", type=DURATION, default="1s", show_default=True,
              help="Time between refreshes.")
@click.option("--once", is_flag=True, help="Print one snapshot and exit (no terminal needed).")
@click.pass_context
def top(ctx: click.Context, interval: float, once: bool) -> None:
    """A live view of every tube, like top; q or Ctrl-C quits.

    Job counts per tube and the throughput of the file. Plain ANSI escapes only, so
    it works over ssh in any terminal.

    Example:

    \b
        sqlq --db /var/lib/app/jobs.db top --interval 2s
    """
    from .top import run_top  # only this command needs it

    run_top(queue_from_ctx(ctx, create=False), interval=max(interval, 0.05), once=once)


@cli.command()
@click.option("--listen", "-l", default="127.0.0.1:11300", show_default=True,
              metavar="HOST:PORT|unix:PATH", help="Where beanstalkd clients connect.")
@click.option("--max-job-size", type=click.IntRange(min=0), default=None,
              help="Largest job body in bytes (default 1 MiB).")
@click.option("--max-buffered", type=click.IntRange(min=1), default=None, metavar="BYTES",
              help="Memory all clients' put bodies in progress may hold at once; a larger "
                   "body waits its turn unread (default 64 MiB, or 4 maximum-size bodies).")
@click.option("--processes", "-P", type=click.IntRange(min=1, max=256), default=1,
              show_default=True, metavar="N",
              help="Serve the port from N processes, for more than one core (TCP on Linux: "
                   "SO_REUSEPORT). A connection stays in one process; `stats` is that "
                   "process's (its pid tells them apart), the job counts the file's.")
@click.pass_context
def serve(ctx: click.Context, listen: str, max_job_size: int | None,
          max_buffered: int | None, processes: int) -> None:
    """Serve the file over the beanstalkd protocol (1.12), for clients in any language.

    The protocol has NO AUTHENTICATION: whoever can connect can read, add and delete
    every job. It listens on loopback unless --listen says otherwise; exposing it
    beyond a trusted network is your decision. Library users and workers keep using
    the same file meanwhile. SIGUSR1 refuses new puts (drain mode); SIGTERM or Ctrl-C
    stop the server and give reserved jobs back. With --processes, a parent starts
    the N processes, starts again one that dies, and passes these signals on; if the
    parent is killed, they stop too.

    Example:

    \b
        sqlq --db jobs.db serve --listen 127.0.0.1:11300 --processes 2
    """
    from sqlq.server import serve as serve_forever

    options: dict[str, Any] = {} if max_job_size is None else {"max_job_size": max_job_size}
    queue = queue_from_ctx(ctx, **options)  # created or migrated once, here, in any case
    many = f", {processes} processes" if processes > 1 else ""

    def ready(address: str) -> None:
        click.echo(f"sqlq serve: {queue.location} on {address}{many} (no authentication)",
                   err=True)

    try:
        if processes > 1:
            from sqlq.server.processes import serve_processes

            queue.close()  # each process opens its own
            code = serve_processes(db_location(ctx), listen, processes, queue=options,
                                   max_job_size=queue.max_job_size,
                                   max_buffered=max_buffered, ready=ready,
                                   fork=may_fork(ctx))
            if code:
                raise sqlq.Error("a server process could not open the queue")
            return
        serve_forever(queue, listen, max_buffered=max_buffered, ready=ready)
    except ValueError as e:
        raise click.BadParameter(str(e), param_hint="--listen") from None
    except OSError as e:
        raise sqlq.Error(f"cannot listen on {listen}: {e.strerror or e}") from None


@cli.command()
@click.option("--listen", "-l", default="127.0.0.1:8080", show_default=True,
              metavar="HOST:PORT", help="Where browsers connect (loopback unless a token is set).")
@click.option("--read-only", is_flag=True, help="Show everything, change nothing: no actions.")
@click.option("--token", envvar="SQLQ_DASHBOARD_TOKEN", metavar="TOKEN",
              help="Require this secret (16+ characters) of every request "
                   "($SQLQ_DASHBOARD_TOKEN); needed to listen beyond loopback.")
@click.option("--token-file", type=click.File("r"), metavar="PATH",
              help="Read the token from this file's first line instead.")
@click.option("--import", "-i", "imports", multiple=True, metavar="MODULE",
              help="A module declaring @q.periodic tasks: their next slots and tubes are "
                   "shown, with a warning for a tube no worker watches.")
@click.option("--trace-url", envvar="SQLQ_DASHBOARD_TRACE_URL", metavar="TEMPLATE",
              help="Link trace ids to a tracing UI: an http(s) URL with {trace_id}, e.g. "
                   "https://jaeger.example/trace/{trace_id} ($SQLQ_DASHBOARD_TRACE_URL).")
@click.pass_context
def dashboard(ctx: click.Context, listen: str, read_only: bool, token: str | None,
              token_file: IO[str] | None, imports: tuple[str, ...],
              trace_url: str | None) -> None:
    """Serve a web dashboard of the queue, with /metrics for Prometheus.

    Every tube's counts and rates live, jobs by state with search, the job page
    (body, counters, bury reason, result), buried jobs to kick or delete, pause and
    resume, workers, periodic tasks and topics. Listens on loopback; another address
    is refused without --token or --token-file. Every action is a POST with a CSRF
    token; --read-only hides and refuses them. Needs the dashboard extra: pip install
    '.[dashboard]' in a checkout of sqlq ('sqlq-jobs[dashboard]' once it is on PyPI).

    Example:

    \b
        sqlq --db jobs.db dashboard --listen 127.0.0.1:8080 --read-only
        sqlq --db jobs.db dashboard --trace-url 'https://jaeger.example/trace/{trace_id}'
    """
    from sqlq.dashboard import serve as serve_dashboard
    from sqlq.dashboard.traces import check_trace_url

    if token is None and token_file is None and os.environ.get("SQLQ_DASHBOARD_TOKEN") == "":
        # click reads an empty variable as unset: say so, not "without --token"
        raise sqlq.Error("$SQLQ_DASHBOARD_TOKEN is set but empty: give it a token of 16+ "
                         "characters (openssl rand -hex 16), or unset it")
    if token_file is not None:
        token = token_file.readline().strip() or None
    if trace_url is not None:
        check_trace_url(trace_url)  # before the queue is opened: a typo costs nothing
    queue = queue_from_ctx(ctx, create=False)
    schedules: dict[str, Any] = {}
    tubes: dict[str, str] = {}
    if imports:
        from sqlq.tasks.task import REGISTRY, import_modules

        import_modules(imports)
        schedules = {name: t.schedule for name, t in REGISTRY.items() if t.schedule}
        tubes = {name: t.tube for name, t in REGISTRY.items() if t.schedule}

    def ready(url: str) -> None:
        mode = ", read-only" if read_only else ""
        click.echo(f"sqlq dashboard: {queue.path} on {url}{mode}", err=True)

    try:
        serve_dashboard(queue, listen, token=token, read_only=read_only, ready=ready,
                        schedules=schedules, periodic_tubes=tubes, trace_url=trace_url)
    except ValueError as e:
        raise click.BadParameter(str(e), param_hint="--listen") from None
    except OSError as e:
        raise sqlq.Error(f"cannot listen on {listen}: {e.strerror or e}") from None


@cli.command()
@click.pass_context
def metrics(ctx: click.Context) -> None:
    """Print the queue's metrics once, in Prometheus' text format.

    The same text as the dashboard's /metrics: jobs per tube and state, put, delete,
    bury, kick and timeout counters, the oldest ready job's age, and what holds back
    the cleanup of deleted jobs (the -wal's size, the oldest snapshot's age, dead
    rows: the docs' Long transactions page). For node-exporter's
    textfile collector, write to a temporary file and rename it into place.

    Example:

    \b
        sqlq --db jobs.db metrics > /var/lib/node-exporter/sqlq.prom.$$ \\
          && mv /var/lib/node-exporter/sqlq.prom.$$ /var/lib/node-exporter/sqlq.prom
    """
    from sqlq.dashboard.metrics import render

    sys.stdout.buffer.write(render(queue_from_ctx(ctx, create=False)))
