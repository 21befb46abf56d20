"""``sqlq backup DEST``: a consistent copy of the live queue (sqlq/backup.py)."""

from __future__ import annotations

import click

from sqlq.backends import is_url

from .group import cli
from .options import json_option, queue_from_ctx
from .output import emit
from .progress import bar, megabytes, quiet_option


@cli.command("backup")
@click.argument("dest")
@click.option("--force", is_flag=True, help="Replace DEST if it exists.")
@quiet_option
@json_option
@click.pass_context
def backup_command(ctx: click.Context, dest: str, force: bool, quiet: bool,
                   as_json: bool) -> None:
    """Write a consistent copy of the queue to the new SQLite file DEST while producers
    and workers go on: every job committed before the command started is in it. DEST
    is written atomically, mode 0600, and checked with PRAGMA integrity_check; an
    existing DEST is refused unless --force. A PostgreSQL queue (--db postgresql://...)
    is copied into a SQLite file as `sqlq copy` moves it. To restore, stop the workers
    and move the copy into place (docs: operations, Backups). On a terminal, stderr
    shows a progress bar (megabytes written, or jobs copied from PostgreSQL), unless
    --quiet.

    Example:

    \b
        sqlq --db /srv/app/app.db backup /backups/app-$(date +%F).db
    """
    queue = queue_from_ctx(ctx, create=False)
    postgres = is_url(queue.location)
    with bar("backing up", "jobs" if postgres else "MB", quiet=quiet, done="backed up",
             scale=None if postgres else megabytes) as shown:
        done = queue.backup(dest, force=force, progress=shown)
    text = (f"backed up {queue.location} to {done.path} "
            f"({done.size / 1e6:.1f} MB in {done.seconds:.2f} s)")
    emit({"backup": done.path, "bytes": done.size, "seconds": round(done.seconds, 3)},
         as_json, text=text)
