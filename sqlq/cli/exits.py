"""Errors become exit codes in one place, :meth:`SqlqGroup.main` (0 ok, 1 error, 2 usage,
3 not found, 4 timed out), printed as one line on stderr, never a traceback
(``SQLQ_DEBUG=1`` shows it)."""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Sequence
from typing import Any

import click

import sqlq

EXIT_OK, EXIT_ERROR, EXIT_USAGE, EXIT_NOT_FOUND, EXIT_TIMEOUT = 0, 1, 2, 3, 4
EXIT_INTERRUPTED, EXIT_BROKEN_PIPE = 130, 141  # what a shell reports for SIGINT / SIGPIPE


class Interrupted(Exception):
    """Ctrl-C, carried past click's own handler (which would print a bare newline)."""


def exit_code_for(exc: BaseException) -> tuple[int, str]:
    """Map an exception to ``(exit code, one-line message)``: the single mapping point."""
    if isinstance(exc, click.exceptions.NoArgsIsHelpError):
        return EXIT_OK, exc.format_message()  # a bare `sqlq` asks for help
    if isinstance(exc, click.NoSuchOption) and exc.option_name == "--db" and exc.ctx \
            and exc.ctx.parent is not None:
        # The likeliest slip (`sqlq put x --db q.db`): click would suggest --tube.
        root = exc.ctx.find_root().command_path
        rest = exc.ctx.command_path[len(root):].strip()
        return EXIT_USAGE, (f"{exc.ctx.command_path}: --db goes before the command: "
                            f"{root} --db PATH {rest} ... (or set $SQLQ_DB)")
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
                import traceback  # imported for this only: every command pays for imports

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
