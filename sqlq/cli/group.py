"""The ``sqlq`` click group: ``--db``, ``--version`` and the help every command lists under.

The group loads a command's module when that command runs (:class:`LazyGroup`, click's
lazy-loading pattern): each ``sqlq`` call is a process of its own, and importing every
command's module (the worker's, the servers', the dashboard's) cost a ``sqlq put`` more
than the put itself.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import click

import sqlq

from .exits import SqlqGroup
from .index import COMMANDS
from .options import db_option

if TYPE_CHECKING:
    from _collections_abc import dict_items, dict_keys, dict_values


def _load(module: str) -> None:
    importlib.import_module(f"sqlq.cli.{module}")  # its decorators add its commands


class _Commands(dict[str, click.Command]):
    """The group's commands, as click keeps them, loaded when asked for: by name
    (``commands["put"]``) its module only, and on a whole view (iteration, ``len``,
    ``keys``, ``values``, ``items``) every module, so mkdocs-click and the tests that
    walk ``cli.commands`` see them all. ``get`` and ``in`` look at what is loaded."""

    def __missing__(self, name: str) -> click.Command:
        if name not in COMMANDS:
            raise KeyError(name)
        _load(COMMANDS[name][0])
        return dict.__getitem__(self, name)

    def _all(self) -> None:
        for module in dict.fromkeys(module for module, _ in COMMANDS.values()):
            _load(module)

    def __iter__(self) -> Iterator[str]:
        self._all()
        return super().__iter__()

    def __len__(self) -> int:
        self._all()
        return super().__len__()

    def keys(self) -> dict_keys[str, click.Command]:
        self._all()
        return super().keys()

    def values(self) -> dict_values[str, click.Command]:
        self._all()
        return super().values()

    def items(self) -> dict_items[str, click.Command]:
        self._all()
        return super().items()

    def names(self) -> list[str]:
        """Every command's name, loaded or not, sorted."""
        return sorted(COMMANDS.keys() | set(dict.keys(self)))

    def loaded(self, name: str) -> click.Command | None:
        """The command if its module is imported, else None."""
        return dict.get(self, name)


class LazyGroup(SqlqGroup):
    """A group whose commands' modules are imported when a command runs, named in
    :data:`sqlq.cli.index.COMMANDS`; its help lists them all from there."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.lazy = _Commands(self.commands)
        self.commands = self.lazy

    def list_commands(self, ctx: click.Context) -> list[str]:
        """Every command's name, none of them imported."""
        return self.lazy.names()

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        """The command, its module imported first (None for an unknown name)."""
        try:
            return self.commands[cmd_name]
        except KeyError:
            return None

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """The commands section of ``sqlq --help``, from the index: a command not yet
        imported is shown through a stand-in with its summary, shortened by click as
        the command itself would be."""
        rows = []
        for name in self.list_commands(ctx):
            command = self.lazy.loaded(name) or click.Command(
                name, help=COMMANDS[name][1])
            if not command.hidden:
                rows.append((name, command))
        if rows:
            limit = formatter.width - 6 - max(len(name) for name, _ in rows)
            with formatter.section("Commands"):
                formatter.write_dl([(name, c.get_short_help_str(limit)) for name, c in rows])


def show_version(ctx: click.Context, _param: click.Parameter, value: bool) -> None:
    """``sqlq, version 0.1.0 (schema: SQLite 1, PostgreSQL 1)``: the package's version
    and the schema version each backend's migrations bring a database to (an operator's
    question before an upgrade). Read only when asked: the files are not read otherwise."""
    if not value or ctx.resilient_parsing:
        return
    from ..backends.migrations import latest_versions

    schemas = ", ".join(f"{name} {n}" for name, n in latest_versions().items())
    click.echo(f"sqlq, version {sqlq.__version__} (schema: {schemas})")
    ctx.exit()


@click.group("sqlq", cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
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
