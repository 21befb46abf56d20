"""The ``sqlq`` command: one thin click command per Queue method.

Each command gets the queue from :func:`queue_from_ctx`, makes one call and prints the
result through :func:`emit`, so plain text and ``--json`` agree across commands. Errors
become exit codes in one place, :meth:`SqlqGroup.main` (0 ok, 1 error, 2 usage, 3 not
found, 4 timed out), printed as one line on stderr, never a traceback (``SQLQ_DEBUG=1``
shows it). A new command is one function using the shared decorators below::

    @cli.command()
    @tube_option
    @json_option
    @click.pass_context
    def frob(ctx: click.Context, tube: str, as_json: bool) -> None:
        \"\"\"Frob a tube.  Example:  sqlq frob --tube emails\"\"\"
        emit(queue_from_ctx(ctx).frob(tube), as_json)

Bodies: plain output shows printable UTF-8 as it is and escapes the rest (``\\xNN``) so
a binary body cannot garble or drive the terminal; ``--raw`` writes the exact bytes and
nothing else; ``--json`` gives ``body`` as text (``"body_encoding": "utf-8"``) or base64
(``"base64"``). See the README's "From the shell".
"""

from __future__ import annotations

import base64
import contextlib
import os
import sys
import traceback
from collections.abc import Callable, Sequence
from typing import IO, TYPE_CHECKING, Any, TypeVar

import click

import sqlq
from sqlq import backends
from sqlq.durations import format_duration, parse_duration
from sqlq.model import check_tube
from sqlq.output import display_text, emit

F = TypeVar("F", bound=Callable[..., Any])

DEFAULT_DB = "sqlq.db"
EXIT_OK, EXIT_ERROR, EXIT_USAGE, EXIT_NOT_FOUND, EXIT_TIMEOUT = 0, 1, 2, 3, 4
EXIT_INTERRUPTED, EXIT_BROKEN_PIPE = 130, 141  # what a shell reports for SIGINT / SIGPIPE


# --- errors -> exit codes -----------------------------------------------------------------


class Interrupted(Exception):
    """Ctrl-C, carried past click's own handler (which would print a bare newline)."""


def exit_code_for(exc: BaseException) -> tuple[int, str]:
    """Map an exception to ``(exit code, one-line message)``: the single mapping point."""
    if isinstance(exc, click.exceptions.NoArgsIsHelpError):
        return EXIT_OK, exc.format_message()  # a bare `sqlq` asks for help
    if isinstance(exc, click.UsageError):
        path = exc.ctx.command_path if exc.ctx else "sqlq"
        return EXIT_USAGE, f"{path}: {_one_line(exc.format_message())} (see '{path} --help')"
    if isinstance(exc, click.ClickException):
        return exc.exit_code, f"sqlq: {_one_line(exc.format_message())}"
    if isinstance(exc, (Interrupted, click.Abort, KeyboardInterrupt)):
        return EXIT_INTERRUPTED, "sqlq: interrupted"
    if isinstance(exc, OSError) and not isinstance(exc, sqlq.Error):
        where = f": {exc.filename}" if exc.filename else ""
        return EXIT_ERROR, f"sqlq: {_one_line(exc.strerror or str(exc))}{where}"
    code = (EXIT_NOT_FOUND if isinstance(exc, sqlq.JobNotFound)
            else EXIT_TIMEOUT if isinstance(exc, sqlq.Timeout)
            # The Queue checks its arguments with messages naming them: usage errors.
            else EXIT_USAGE if isinstance(exc, (sqlq.InvalidTube, ValueError))
            else EXIT_ERROR)
    name = "" if isinstance(exc, (sqlq.Error, ValueError)) else f"{type(exc).__name__}: "
    return code, f"sqlq: {name}{_one_line(str(exc))}"


def _one_line(text: str) -> str:
    return " ".join(str(text).split())


class SqlqGroup(click.Group):
    """A click group whose ``main`` turns every error into an exit code and one stderr line.

    Doing it here, not in a wrapper, means ``CliRunner.invoke(cli, ...)`` in the tests
    sees exactly what a shell user sees.
    """

    def main(self, args: Sequence[str] | None = None, prog_name: str | None = None,
             complete_var: str | None = None, standalone_mode: bool = True,
             **extra: Any) -> Any:
        """Run the command line; exit (or, with standalone_mode=False, return) its code."""
        try:
            rv = super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
            code = rv if isinstance(rv, int) else EXIT_OK
            sys.stdout.flush()  # meet a broken pipe here, not at interpreter exit
        except BrokenPipeError:
            # The reader left (`sqlq peek 1 --raw | head -c 9`): exit as if killed by
            # SIGPIPE, silently, and keep Python from complaining at exit.
            with contextlib.suppress(OSError, ValueError):
                os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            code = EXIT_BROKEN_PIPE
        except (Exception, KeyboardInterrupt) as exc:  # noqa: BLE001 - the one mapping point
            code, message = exit_code_for(exc)
            if os.environ.get("SQLQ_DEBUG"):
                traceback.print_exc()
            click.echo(message, err=code != EXIT_OK)
        if standalone_mode:
            sys.exit(code)
        return code

    def invoke(self, ctx: click.Context) -> Any:
        """Run the command; Ctrl-C leaves as :class:`Interrupted` for :meth:`main`."""
        try:
            return super().invoke(ctx)
        except KeyboardInterrupt:
            if sys.stderr.isatty():
                sys.stderr.write("\n")  # past the terminal's "^C"
            raise Interrupted() from None


# --- shared options and types -------------------------------------------------------------

if TYPE_CHECKING:  # click >= 8.3 makes ParamType generic; older clicks cannot subscript it
    _ParamType = click.ParamType[Any, Any]
else:
    _ParamType = click.ParamType


class Checked(_ParamType):
    """A value checked by one of sqlq's own rules, so a bad one is a usage error (exit 2)
    whose message names the option (``Invalid value for '--delay': '5x' is not a
    duration``): the library's check and message, the command line's exit code."""

    def __init__(self, name: str, check: Callable[[Any], Any]) -> None:
        self.name = name
        self._check = check

    def convert(self, value: Any, param: click.Parameter | None,
                ctx: click.Context | None) -> Any:
        """The checked value, or a usage error with the check's own message."""
        try:
            return self._check(value)
        except (ValueError, TypeError) as exc:
            self.fail(str(exc), param, ctx)

    def get_metavar(self, param: click.Parameter, ctx: click.Context | None = None) -> str:
        """``TUBE``, ``DURATION``: the group's help explains them."""
        return self.name.upper()


def _prefetch(value: object) -> int | None:
    from sqlq.work.prefetch import parse_prefetch  # the worker's modules load on first use

    return parse_prefetch(value)


TUBE = Checked("tube", check_tube)
DURATION = Checked("duration", parse_duration)
PREFETCH = Checked("n|auto", _prefetch)

#: --db PATH, else $SQLQ_DB, else ./sqlq.db (an option of the group, before the command).
db_option = click.option("--db", "db_path", envvar="SQLQ_DB", default=DEFAULT_DB,
                         show_default=True, metavar="PATH", help="The database file ($SQLQ_DB).")
#: --tube T: the one tube a command acts on.
tube_option = click.option("--tube", "-t", type=TUBE, default="default", show_default=True,
                           help="The tube to use.")
#: --tube T, repeatable: the tubes to watch (reserve, work).
tubes_option = click.option("--tube", "-t", "tubes", type=TUBE, multiple=True,
                            help="A tube to watch; repeat for several.  [default: default]")
#: --json: output for scripts, one object per line for lists.
json_option = click.option("--json", "as_json", is_flag=True,
                           help="Print JSON (one object per line for lists).")
#: --raw: a job's body, byte for byte, and nothing else.
raw_option = click.option("--raw", is_flag=True,
                          help="Write only the body, byte for byte, with no newline added.")
#: --delay DURATION before a job is ready.
delay_option = click.option("--delay", "-d", type=DURATION, default=0.0,
                            help="Wait this long before it is ready.")
#: --ttr DURATION: how long a reservation lasts.
ttr_option = click.option("--ttr", type=DURATION, default="60s", show_default=True,
                          help="Time to run: a reservation lasts this long (at least 1s).")
#: The ID argument of by-id commands.
job_id_argument = click.argument("job_id", metavar="ID", type=click.IntRange(min=1))


def priority_option(default: int | None) -> Callable[[F], F]:
    """``--priority N``; a None default means "keep the job's own" (release, bury)."""
    return click.option("--priority", "-p", type=click.IntRange(0, 2**32 - 1), default=default,
                        show_default=default is not None, metavar="N",
                        help="0 is the most urgent, 4294967295 the least.")


def put_options(f: F) -> F:
    """The options every producing command shares: tube, priority, delay, ttr."""
    for decorate in (ttr_option, delay_option, priority_option(1024), tube_option):
        f = decorate(f)
    return f


def queue_from_ctx(ctx: click.Context, *, create: bool = True, **options: Any) -> sqlq.Queue:
    """The Queue of this invocation, opened once and closed when the command ends.

    Args:
        ctx: any click context of the invocation.
        create: False for commands that only look at or act on existing jobs, so that a
            typo in ``--db`` is an error instead of a new, empty database.
        options: keywords for ``sqlq.Queue`` (``max_job_size=``, ``durability=`` ...).
    """
    root = ctx.find_root()
    root.ensure_object(dict)
    queue: sqlq.Queue | None = root.obj.get("queue")
    if queue is None:
        path: str = root.params.get("db_path") or DEFAULT_DB
        if not create and not backends.exists(path):
            raise sqlq.Error(f"no database at {path} (use --db PATH or $SQLQ_DB)")
        queue = root.obj["queue"] = sqlq.Queue(path, **options)
        root.call_on_close(queue.close)
    return queue


def _read_body(body: str | None) -> bytes:
    """The body from the argument (exact argv bytes) or, for ``-`` or none, from stdin."""
    if body is not None and body != "-":
        return os.fsencode(body)  # undoes the surrogateescape of non-UTF-8 argv bytes
    if body is None and sys.stdin.isatty():
        raise click.UsageError("give the BODY as an argument, or '-' to read it from stdin")
    return sys.stdin.buffer.read()


# --- the group and its commands -----------------------------------------------------------


@click.group("sqlq", cls=SqlqGroup, context_settings={"help_option_names": ["-h", "--help"]})
@db_option
@click.version_option(sqlq.__version__, "--version", "-V", prog_name="sqlq")
@click.pass_context
def cli(ctx: click.Context, db_path: str) -> None:
    """sqlq: a durable job queue in one SQLite file, with beanstalkd's verbs.

    Jobs live in tubes; a worker reserves the most urgent ready job, then deletes,
    releases or buries it. DURATION values are seconds (30, 1.5) or carry a unit:
    500ms, 10s, 5m, 2h, 1d. Exit codes: 0 ok, 1 error, 2 usage, 3 not found,
    4 timed out.

    Example:

    \b
        sqlq put 'resize photo 7' --tube thumbs && sqlq reserve --tube thumbs
    """
    ctx.ensure_object(dict)


@cli.command()
@click.argument("body", required=False)
@put_options
@click.option("--unique-key", "-u", help="Insert nothing if a live job in the tube has this key.")
@json_option
@click.pass_context
def put(ctx: click.Context, body: str | None, tube: str, priority: int, delay: float,
        ttr: float, unique_key: str | None, as_json: bool) -> None:
    """Put a job into a tube and print its id.

    BODY is the job's body; '-' (or no BODY with a pipe on stdin) reads it from stdin,
    byte for byte.

    Example:

    \b
        sqlq put '{"to": "a@example.com"}' --tube emails --delay 5m
        gzip -c report.csv | sqlq put - --tube reports
    """
    jid = queue_from_ctx(ctx).put(_read_body(body), tube=tube, priority=priority, delay=delay,
                                  ttr=ttr, unique_key=unique_key)
    emit({"id": jid}, as_json, text=str(jid))


@cli.command("put-many")
@click.argument("file", type=click.File("rb"), default="-")
@put_options
@click.option("--null", "-0", "null", is_flag=True,
              help="Bodies end with NUL instead of newline (as with find -print0).")
@json_option
@click.pass_context
def put_many(ctx: click.Context, file: IO[bytes], tube: str, priority: int, delay: float,
             ttr: float, null: bool, as_json: bool) -> None:
    """Put one job per line of FILE (or stdin) at once; print the ids.

    All the jobs are put in one transaction: all or none.
    Empty lines are skipped. With --null, bodies are separated by NUL bytes, so they
    may contain newlines.

    Example:

    \b
        seq 1 100 | sqlq put-many --tube numbers
        find /srv/in -name '*.jpg' -print0 | sqlq put-many -0 --tube thumbs
    """
    sep = b"\0" if null else b"\n"
    bodies = [b for b in file.read().split(sep) if b]
    ids = queue_from_ctx(ctx).put_many(bodies, tube=tube, priority=priority, delay=delay,
                                       ttr=ttr)
    emit([{"id": i} for i in ids], as_json, text="\n".join(map(str, ids)) if ids else None)


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
    queue_from_ctx(ctx, create=False).delete(job_id)
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
@tube_option
@raw_option
@json_option
@click.pass_context
def peek(ctx: click.Context, job_id: int | None, which: str | None, tube: str, raw: bool,
         as_json: bool) -> None:
    """Show a job by ID, or the next --ready/--delayed/--buried one.

    The job is not reserved. Exit 3 if there is no such job.

    Example:

    \b
        sqlq peek 42
        sqlq peek --buried --tube emails --json
    """
    if (job_id is None) == (which is None):
        raise click.UsageError("give a job ID or one of --ready, --delayed, --buried")
    queue = queue_from_ctx(ctx, create=False)
    if job_id is not None:
        job, missing = queue.peek(job_id), f"job {job_id} not found"
    else:
        job, missing = getattr(queue, f"peek_{which}")(tube), f"no {which} job in tube {tube}"
    if job is None:
        raise sqlq.JobNotFound(missing)
    emit(job, as_json, raw=raw)


@cli.command()
@click.option("--tube", "-t", type=TUBE, help="Statistics of this tube.")
@click.option("--job", "-j", "job_id", type=click.IntRange(min=1), help="Statistics of this job.")
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
    emit(queue.stats_job(job_id) if job_id is not None else queue.stats_tube(tube)
         if tube is not None else queue.stats(), as_json)


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
        record = {"id": job_id, "result": base64.b64encode(data).decode("ascii"),
                  "result_encoding": "base64"}
    emit(record, as_json, text=display_text(data))


@cli.command()
@click.argument("topic", type=TUBE)
@click.argument("body", required=False)
@priority_option(1024)
@delay_option
@ttr_option
@click.option("--unique-key", "-u", help="A tube holding a live job with this key gets no copy.")
@json_option
@click.pass_context
def publish(ctx: click.Context, topic: str, body: str | None, priority: int, delay: float,
            ttr: float, unique_key: str | None, as_json: bool) -> None:
    """Put a copy of a job into every tube subscribed to TOPIC; print the ids.

    All copies are put in one transaction. No subscriber: nothing is put, and nothing
    printed. BODY '-' (or none, with a pipe on stdin) reads it from stdin.

    Example:

    \b
        sqlq subscribe orders emails && sqlq publish orders '{"order": 7}'
    """
    ids = queue_from_ctx(ctx).publish(topic, _read_body(body), priority=priority, delay=delay,
                                      ttr=ttr, unique_key=unique_key)
    emit([{"id": i} for i in ids], as_json, text="\n".join(map(str, ids)) if ids else None)


@cli.command()
@click.argument("topic", type=TUBE)
@click.argument("tube", type=TUBE)
@json_option
@click.pass_context
def subscribe(ctx: click.Context, topic: str, tube: str, as_json: bool) -> None:
    """Subscribe TUBE to TOPIC: every publish to TOPIC puts a copy into TUBE.

    Subscriptions live in the file: the tube fills while its workers are down.

    Example:

    \b
        sqlq subscribe orders audit
    """
    queue_from_ctx(ctx).subscribe(topic, tube)
    emit({"topic": topic, "tube": tube, "subscribed": True}, as_json,
         text=f"subscribed tube {tube} to topic {topic}")


@cli.command()
@click.argument("topic", type=TUBE)
@click.argument("tube", type=TUBE)
@json_option
@click.pass_context
def unsubscribe(ctx: click.Context, topic: str, tube: str, as_json: bool) -> None:
    """Stop copying TOPIC into TUBE (exit 3 if it was not subscribed).

    Jobs already in the tube stay there.

    Example:

    \b
        sqlq unsubscribe orders audit
    """
    if not queue_from_ctx(ctx, create=False).unsubscribe(topic, tube):
        raise sqlq.JobNotFound(f"tube {tube} is not subscribed to topic {topic}")
    emit({"topic": topic, "tube": tube, "subscribed": False}, as_json,
         text=f"unsubscribed tube {tube} from topic {topic}")


@cli.command()
@click.argument("topic", type=TUBE, required=False)
@json_option
@click.pass_context
def subscriptions(ctx: click.Context, topic: str | None, as_json: bool) -> None:
    """List subscriptions as "TOPIC TUBE" lines (only TOPIC's when given).

    Example:

    \b
        sqlq subscriptions orders --json
    """
    pairs = queue_from_ctx(ctx, create=False).subscriptions(topic)
    emit([{"topic": t, "tube": u} for t, u in pairs], as_json,
         text="\n".join(f"{t} {u}" for t, u in pairs) or None)


@cli.command()
@json_option
@click.pass_context
def maintain(ctx: click.Context, as_json: bool) -> None:
    """Housekeeping, and what holds it back: on a file, checkpoint the WAL and check
    the file; on PostgreSQL, vacuum the jobs table and report dead rows and the
    oldest open transaction on the server (its snapshot keeps deleted jobs around).

    Example:

    \b
        sqlq --db postgresql://app@db/app maintain
    """
    report = queue_from_ctx(ctx, create=False).backend.maintain()
    emit(report, as_json)


@cli.command("copy")
@click.argument("source")
@click.argument("target")
@json_option
def copy_command(source: str, target: str, as_json: bool) -> None:
    """Copy every live job and all queue state from SOURCE to TARGET (a file or a
    postgresql:// URL): states, priorities, delays, counters, unique keys, pauses,
    results, subscriptions, periodic slots, and the id counter. TARGET must be new
    or empty; it is written in one transaction. Stop the workers first: a reserved
    job is copied as ready.

    Example:

    \b
        sqlq copy app.db postgresql://app@db.internal/app
    """
    from sqlq.copy import copy

    report = copy(source, target)
    emit({**report.counts, "total-jobs": report.total_jobs}, as_json)


@cli.command()
@click.option("--interval", "-i", type=DURATION, default=1.0, show_default=True,
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
    from sqlq.top import run_top  # only this command needs it

    run_top(queue_from_ctx(ctx, create=False), interval=max(interval, 0.05), once=once)


@cli.command()
@click.option("--listen", "-l", default="127.0.0.1:11300", show_default=True,
              metavar="HOST:PORT|unix:PATH", help="Where beanstalkd clients connect.")
@click.option("--max-job-size", type=click.IntRange(min=0), default=None,
              help="Largest job body in bytes (default 1 MiB).")
@click.option("--max-buffered", type=click.IntRange(min=1), default=None, metavar="BYTES",
              help="Memory all clients' put bodies in progress may hold at once; a larger "
                   "body waits its turn unread (default 64 MiB, or 4 maximum-size bodies).")
@click.pass_context
def serve(ctx: click.Context, listen: str, max_job_size: int | None,
          max_buffered: int | None) -> None:
    """Serve the file over the beanstalkd protocol (1.12), for clients in any language.

    The protocol has NO AUTHENTICATION: whoever can connect can read, add and delete
    every job. It listens on loopback unless --listen says otherwise; exposing it
    beyond a trusted network is your decision. Library users and workers keep using
    the same file meanwhile. SIGUSR1 refuses new puts (drain mode); SIGTERM or Ctrl-C
    stop the server and give reserved jobs back.

    Example:

    \b
        sqlq --db jobs.db serve --listen 127.0.0.1:11300
    """
    from sqlq.server import serve as serve_forever

    options: dict[str, Any] = {} if max_job_size is None else {"max_job_size": max_job_size}
    queue = queue_from_ctx(ctx, **options)

    def ready(address: str) -> None:
        click.echo(f"sqlq serve: {queue.location} on {address} (no authentication)", err=True)

    try:
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
              help="A module declaring @q.periodic tasks: their next slots are shown.")
@click.pass_context
def dashboard(ctx: click.Context, listen: str, read_only: bool, token: str | None,
              token_file: IO[str] | None, imports: tuple[str, ...]) -> None:
    """Serve a web dashboard of the queue, with /metrics for Prometheus.

    Every tube's counts and rates live, jobs by state with search, the job page
    (body, counters, bury reason, result), buried jobs to kick or delete, pause and
    resume, workers, periodic tasks and topics. Listens on loopback; another address
    is refused without --token or --token-file. Every action is a POST with a CSRF
    token; --read-only hides and refuses them. Needs: pip install 'sqlq-jobs[dashboard]'.

    Example:

    \b
        sqlq --db jobs.db dashboard --listen 127.0.0.1:8080 --read-only
    """
    from sqlq.dashboard import serve as serve_dashboard

    if token_file is not None:
        token = token_file.readline().strip() or None
    queue = queue_from_ctx(ctx, create=False)
    schedules: dict[str, Any] = {}
    if imports:
        from sqlq.work.tasks import REGISTRY, import_modules

        import_modules(imports)
        schedules = {name: t.schedule for name, t in REGISTRY.items() if t.schedule}

    def ready(url: str) -> None:
        mode = ", read-only" if read_only else ""
        click.echo(f"sqlq dashboard: {queue.path} on {url}{mode}", err=True)

    try:
        serve_dashboard(queue, listen, token=token, read_only=read_only, ready=ready,
                        schedules=schedules)
    except ValueError as e:
        raise click.BadParameter(str(e), param_hint="--listen") from None
    except OSError as e:
        raise sqlq.Error(f"cannot listen on {listen}: {e.strerror or e}") from None


@cli.command()
@click.pass_context
def metrics(ctx: click.Context) -> None:
    """Print the queue's metrics once, in Prometheus' text format.

    The same text as the dashboard's /metrics: jobs per tube and state, put, delete,
    bury, kick and timeout counters, the oldest ready job's age. For node-exporter's
    textfile collector, write to a temporary file and rename it into place.

    Example:

    \b
        sqlq --db jobs.db metrics > /var/lib/node-exporter/sqlq.prom.$$ \\
          && mv /var/lib/node-exporter/sqlq.prom.$$ /var/lib/node-exporter/sqlq.prom
    """
    from sqlq.dashboard.metrics import render

    sys.stdout.buffer.write(render(queue_from_ctx(ctx, create=False)))


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
@click.option("--backoff", type=DURATION, default=1.0, show_default=True,
              help="Wait before COMMAND's first retry; doubles, with jitter, each time.")
@click.option("--grace", type=DURATION, default=30.0, show_default=True,
              help="On SIGTERM/SIGINT, let running jobs finish this long, then release them.")
@click.option("--keepalive", is_flag=True,
              help="Touch COMMAND's job at 80% of its TTR instead of killing it at the TTR.")
@click.option("--log-level", type=click.Choice(["DEBUG", "INFO", "WARNING", "ERROR"],
              case_sensitive=False), default="INFO", show_default=True)
@click.option("--log-format", type=click.Choice(["text", "json"]), default="text",
              show_default=True, help="json: one object per line (job, tube, task, outcome...).")
@click.option("--durability", type=click.Choice(["full", "normal"]), default="full",
              show_default=True, help="normal: deletes are not fsynced (about 3x the jobs/s).")
@click.option("--in-process", is_flag=True, hidden=True,
              help="Be one worker, without a supervisor (how a supervisor starts its own).")
@click.argument("command", nargs=-1, type=click.UNPROCESSED, metavar="[-- COMMAND ARGS...]")
@click.pass_context
def work(ctx: click.Context, imports: tuple[str, ...], tubes: tuple[str, ...], processes: int,
         concurrency: int, prefetch: int | None, burst: bool, retries: int, backoff: float,
         grace: float, keepalive: bool,
         log_level: str, log_format: str, durability: str, in_process: bool,
         command: tuple[str, ...]) -> None:
    """Run jobs: task functions from --import modules, or COMMAND once per job.

    Tasks are dispatched by the name in the job's body; a failure is retried with
    exponential backoff, then buried with the error (see 'sqlq peek --buried').
    COMMAND gets the body on stdin and SQLQ_JOB_ID, SQLQ_TUBE, SQLQ_ATTEMPT in its
    environment; exit 0 deletes the job, anything else retries then buries it, and
    it is killed when its TTR runs out (unless --keepalive). Without --db, a task
    worker uses the file its tasks' Queue opened. SIGTERM or Ctrl-C: stop reserving,
    finish running jobs within --grace, release the rest, exit 0.

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
        durability=durability, in_process=in_process)
    ctx.exit(run(config))


def main() -> None:
    """The ``sqlq`` console script and ``python -m sqlq``."""
    cli.main(prog_name="sqlq")
