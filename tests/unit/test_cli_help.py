"""Every command documents itself with an example (sqlite-utils' rule, tests/test_docs.py).

New commands are picked up automatically: adding one without an ``Example:`` fails here.
"""

from __future__ import annotations

from pathlib import Path

import click
import pytest
from click.testing import CliRunner

import sqlq.cli
from sqlq.cli import cli

COMMANDS = sorted(cli.commands)

# The verbs docs/spec.md's "Command line" section promises from this module (others add theirs).
SPEC_COMMANDS = {"put", "put-many", "reserve", "delete", "release", "bury", "kick", "kick-job",
                 "touch", "peek", "stats", "tubes", "pause", "top"}


def test_spec_commands_exist() -> None:
    assert set(COMMANDS) >= SPEC_COMMANDS


def test_group_help_lists_every_command_and_has_an_example() -> None:
    result = CliRunner().invoke(cli, ["--help"])
    assert result.exit_code == 0
    for name in COMMANDS:
        assert f"  {name} " in result.output or f"  {name}\n" in result.output, name
    assert "Example:" in result.output
    assert "--db PATH" in result.output and "SQLQ_DB" in result.output


def test_no_arguments_shows_help() -> None:
    result = CliRunner().invoke(cli, [])
    assert result.exit_code == 0
    assert "Usage:" in result.output and "Commands:" in result.output


@pytest.mark.parametrize("name", COMMANDS)
def test_command_help_has_an_example(name: str) -> None:
    result = CliRunner().invoke(cli, [name, "--help"])
    assert result.exit_code == 0, result.output
    assert "Example:" in result.output, f"sqlq {name} --help has no Example:"
    example = result.output.split("Example:", 1)[1]
    assert "sqlq " in example, f"the example of sqlq {name} does not run sqlq"
    # A one-line summary for `sqlq --help`, written as a sentence.
    summary = cli.commands[name].get_short_help_str(limit=200)
    assert summary and summary[0].isupper(), name


@pytest.mark.parametrize("name", COMMANDS)
def test_usage_names_each_argument_apart(name: str) -> None:
    """`sqlq subscribe TOPIC TUBE`, not `TUBE TUBE` (both are checked as tube names)."""
    command = cli.commands[name]
    with click.Context(command, info_name=name) as ctx:
        metavars = [p.make_metavar(ctx) for p in command.params
                    if isinstance(p, click.Argument)]
    assert len(set(metavars)) == len(metavars), (name, metavars)
    for param in command.params:
        if isinstance(param, click.Argument) and param.name == "topic":
            assert "TOPIC" in CliRunner().invoke(cli, [name, "--help"]).output.splitlines()[0]


@pytest.mark.parametrize("name", COMMANDS)
def test_short_help_flag(name: str) -> None:
    assert CliRunner().invoke(cli, [name, "-h"]).exit_code == 0


#: STYLE.md's size for a module; the command line is a package of modules with one job each.
MODULE_LINES = 400


def test_the_command_line_is_small_modules() -> None:
    """sqlq/cli/ holds the group, the shared options, the exit codes and the commands in
    modules of at most MODULE_LINES lines, and every command is registered on import."""
    package = Path(sqlq.cli.__file__ or "").parent
    assert package.name == "cli" and Path(sqlq.cli.__file__ or "").name == "__init__.py"
    sizes = {p.name: len(p.read_text().splitlines()) for p in package.glob("*.py")}
    assert len(sizes) > 1
    assert all(n <= MODULE_LINES for n in sizes.values()), sizes
    assert {"put", "reserve", "stats", "publish", "serve", "work", "copy"} <= set(COMMANDS)
