"""Commands that put jobs: one (``sqlq put``) or one a line of a file (``sqlq put-many``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import IO

import click

from .group import cli
from .options import (
    after_option,
    group_option,
    input_size,
    json_option,
    on_conflict,
    put_options,
    queue_from_ctx,
    read_bodies,
    read_body,
    replace_option,
    spool,
)
from .output import IdRuns, emit, emit_ids
from .progress import bar, quiet_option


def _after(groups: Sequence[tuple[int, ...]]) -> list[int] | None:
    """The --after options as one list of parent ids (None: no option given)."""
    return [i for group in groups for i in group] or None


@cli.command()
@click.argument("body", required=False)
@put_options
@click.option("--unique-key", "-u", help="Insert nothing if a live job in the tube has this key.")
@replace_option
@after_option
@group_option
@json_option
@click.pass_context
def put(ctx: click.Context, body: str | None, tube: str, priority: int, delay: float,
        ttr: float, unique_key: str | None, replace: bool, after: Sequence[tuple[int, ...]],
        group: str | None, as_json: bool) -> None:
    """Put a job into a tube and print its id.

    BODY is the job's body; '-' (or no BODY with a pipe on stdin) reads it from stdin,
    byte for byte. With --after, the job waits (state waiting) until every job named
    is gone, then is ready (or delayed by --delay from then); an id never issued
    exits 3 and puts nothing. With --unique-key and --replace (debounce), a waiting,
    ready or delayed job holding the key takes this body and options, and its id is
    printed; a running or buried one is followed by a new job that waits for it.

    Example:

    \b
        sqlq put '{"to": "a@example.com"}' --tube emails --delay 5m
        gzip -c report.csv | sqlq put - --tube reports
        sqlq put '{"report": 7}' --tube mail --after 41 --after 42
        sqlq put '{"account": 42}' --tube sync --unique-key sync:42 --replace --delay 5
        sqlq put '{"account": 42}' --tube syncs --group acct-42
    """
    jid = queue_from_ctx(ctx).put(read_body(body), tube=tube, priority=priority, delay=delay,
                                  ttr=ttr, unique_key=unique_key, after=_after(after),
                                  on_conflict=on_conflict(replace), group=group)
    emit({"id": jid}, as_json, text=str(jid))


@cli.command("put-many")
@click.argument("file", type=click.File("rb"), default="-")
@put_options
@click.option("--null", "-0", "null", is_flag=True,
              help="Bodies end with NUL instead of newline (as with find -print0).")
@after_option
@group_option
@quiet_option
@json_option
@click.pass_context
def put_many(ctx: click.Context, file: IO[bytes], tube: str, priority: int, delay: float,
             ttr: float, null: bool, after: Sequence[tuple[int, ...]], group: str | None,
             quiet: bool,
             as_json: bool) -> None:
    """Put one job per line of FILE (or stdin) at once; print the ids.

    All the jobs are put in one transaction: all or none.
    Empty lines are skipped. With --null, bodies are separated by NUL bytes, so they
    may contain newlines. With --after, every job waits for all the jobs named.
    FILE is read a megabyte at a time, so a file of millions of lines takes little
    memory; a pipe is read whole before the first put (past 8 MB into a temporary
    file), so the transaction is as short as with a file. On a terminal, stderr
    shows a progress bar (jobs put, their rate, the time left), unless --quiet.

    Example:

    \b
        seq 1 100 | sqlq put-many --tube numbers
        find /srv/in -name '*.jpg' -print0 | sqlq put-many -0 --tube thumbs
        ls *.csv | sqlq put-many --tube import --after "$(sqlq put setup --tube import)"
    """
    queue = queue_from_ctx(ctx)
    size, parents, ids = input_size(file), _after(after), IdRuns()
    if size is None:  # a pipe: read whole first (into a temporary file past a few MB)
        file, size = spool(file)
    with bar("putting", "jobs", quiet=quiet, done="put") as shown, queue.transaction() as tx:
        for bodies, read in read_bodies(file, b"\0" if null else b"\n", queue.max_job_size):
            if bodies:
                ids.extend(tx.put_many(bodies, tube=tube, priority=priority, delay=delay,
                                       ttr=ttr, after=parents, group=group))
            shown(len(ids), read / size if size else None)
        if not ids:  # no bodies: the options are still checked, as put_many checks them
            tx.put_many([], tube=tube, priority=priority, delay=delay, ttr=ttr, after=parents,
                        group=group)
    emit_ids(ids, as_json)
