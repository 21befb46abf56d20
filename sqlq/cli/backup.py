"""``sqlq backup DEST``: a consistent copy of the live queue (sqlq/backup.py)."""

from __future__ import annotations

import click

from .group import cli
from .options import json_option, queue_from_ctx
from .output import emit


@cli.command("backup")
@click.argument("dest")
@click.option("--force", is_flag=True, help="Replace DEST if it exists.")
@json_option
@click.pass_context
def backup_command(ctx: click.Context, dest: str, force: bool, as_json: bool) -> None:
    """Write a consistent copy of the queue to the new SQLite file DEST while producers
    and workers go on: every job committed before the command started is in it. DEST
    is written atomically, mode 0600, and checked with PRAGMA integrity_check; an
    existing DEST is refused unless --force. A PostgreSQL queue (--db postgresql://...)
    is copied into a SQLite file as `sqlq copy` moves it. To restore, stop the workers
    and move the copy into place (docs: operations, Backups).

    Example:

    \b
        sqlq --db /srv/app/app.db backup /backups/app-$(date +%F).db
    """
    queue = queue_from_ctx(ctx, create=False)
    done = queue.backup(dest, force=force)
    text = (f"backed up {queue.location} to {done.path} "
            f"({done.size / 1e6:.1f} MB in {done.seconds:.2f} s)")
    emit({"backup": done.path, "bytes": done.size, "seconds": round(done.seconds, 3)},
         as_json, text=text)
