"""The ``sqlq`` click group: ``--db``, ``--version`` and the help every command lists under."""

from __future__ import annotations

import click

import sqlq

from ..backends.migrations import latest_versions
from .exits import SqlqGroup
from .options import db_option


def show_version(ctx: click.Context, _param: click.Parameter, value: bool) -> None:
    """``sqlq, version 0.1.0 (schema: SQLite 14, PostgreSQL 17)``: the package's version
    and the schema version each backend's migrations bring a database to (an operator's
    question before an upgrade). Read only when asked: the files are not read otherwise."""
    if not value or ctx.resilient_parsing:
        return
    schemas = ", ".join(f"{name} {n}" for name, n in latest_versions().items())
    click.echo(f"sqlq, version {sqlq.__version__} (schema: {schemas})")
    ctx.exit()



@click.group("sqlq", cls=SqlqGroup, context_settings={"help_option_names": ["-h", "--help"]})
@db_option
@click.option("--version", "-V", is_flag=True, expose_value=False, is_eager=True,
              callback=show_version, help="Show the version and the schema versions, and exit.")
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
