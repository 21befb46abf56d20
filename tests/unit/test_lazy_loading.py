"""Modules loaded on first use (issue 34). The ``sqlq`` group loads a command's module
only when that command runs (``sqlq/cli/index.py``): the index must name each command's
real module and summary, and ``sqlq --help`` drawn from it must read exactly as from the
commands. tests/integration/test_startup.py checks in a fresh process what a put imports."""

from __future__ import annotations

import json

import click
import pytest

from sqlq.cli import cli
from sqlq.cli.group import LazyGroup
from sqlq.cli.index import COMMANDS


def _real() -> dict[str, tuple[str, str]]:
    """The index as the loaded commands say it should read."""
    return {name: (c.callback.__module__.rsplit(".", 1)[1] if c.callback else "",
                   c.get_short_help_str(limit=10**6))
            for name, c in sorted(cli.commands.items())}


def test_the_index_names_each_commands_module_and_summary() -> None:
    real = _real()
    if real != COMMANDS:  # print the table to paste into sqlq/cli/index.py
        print("\n".join(f"    {json.dumps(k)}: ({json.dumps(m)}, {json.dumps(s)}),"
                        for k, (m, s) in real.items()))
    assert real == COMMANDS


@pytest.mark.parametrize("width", [50, 80, 120])
def test_help_from_the_index_reads_as_from_the_commands(width: int) -> None:
    """A group with nothing loaded lists the stand-ins; click's own listing, the
    loaded commands: same text at every terminal width."""
    fresh = LazyGroup("sqlq")
    assert fresh.lazy.loaded("put") is None

    def listing(group: click.Group, draw: object) -> str:
        ctx = click.Context(group, info_name="sqlq", terminal_width=width)
        formatter = ctx.make_formatter()
        draw(group, ctx, formatter)  # type: ignore[operator]
        return formatter.getvalue()

    lazy = listing(fresh, LazyGroup.format_commands)
    assert "put " in lazy and "work " in lazy
    assert lazy == listing(cli, click.Group.format_commands)


def test_unknown_and_known_commands_resolve() -> None:
    assert cli.get_command(click.Context(cli), "no-such-command") is None
    put = cli.get_command(click.Context(cli), "put")
    assert put is not None and put.name == "put"
    assert cli.commands["put"] is put
    with pytest.raises(KeyError):
        cli.commands["no-such-command"]


def test_what_stands_in_for_a_module_loaded_later_is_that_modules() -> None:
    """Values that stand in for a module not imported with the Queue (issue 34)."""
    import inspect
    import sqlite3

    import sqlq
    from sqlq import throughput
    from sqlq.backends.sqlite import drivers

    default = inspect.signature(sqlq.Queue.throughput).parameters["minutes"].default
    assert default == throughput.KEEP_MINUTES
    assert drivers.DRIVERS["sqlite3"].Error is sqlite3.Error
    assert drivers.DRIVERS["sqlite3"].busy(sqlite3.OperationalError("database is locked"))
