"""The ``sqlq`` click group: ``--db``, ``--version`` and the help every command lists under."""

from __future__ import annotations

import click

import sqlq

from .exits import SqlqGroup
from .options import db_option


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
