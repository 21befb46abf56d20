"""``python manage.py sqlq ...``: the ``sqlq`` command line on the queue of
``settings.SQLQ``, with every command and option of ``sqlq --help``.

It passes ``--db`` for the configured queue (after creating sqlq's tables in a
shared Django database), and the environment a worker process needs to start
Django by itself (``DJANGO_SETTINGS_MODULE``, the project on ``PYTHONPATH``,
``SQLQ_SQLITE_DRIVER=sqlite3`` beside Django's SQLite, ``PGPASSWORD`` rather than a
password on a command line). ``work`` and ``dashboard`` import
``sqlq.contrib.django.boot``, which sets Django up and so imports the apps' tasks.

Examples::

    python manage.py sqlq work --processes 4
    python manage.py sqlq peek --buried --tube emails
    python manage.py sqlq top
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

#: The commands that run tasks or show them, and so need the apps' tasks imported.
_WITH_TASKS = ("work", "dashboard")
BOOT = "sqlq.contrib.django.boot"


def sqlq_argv(args: list[str]) -> list[str]:
    """The ``sqlq`` command line for ``manage.py sqlq ARGS``: the configured ``--db``
    first (a ``--db`` in ARGS still wins), and the boot module for ``work`` and
    ``dashboard`` (not for ``work -- COMMAND``, a shell command per job)."""
    from sqlq.contrib.django.queue import queue

    argv = ["--db", queue.config.child_location(), *args]
    index = _command_index(argv)
    if index is not None and argv[index] in _WITH_TASKS and "--" not in argv[index:]:
        argv[index + 1:index + 1] = ["--import", BOOT]
    return argv


def _command_index(argv: list[str]) -> int | None:
    skip = False
    for i, arg in enumerate(argv):
        if skip:
            skip = False
        elif arg == "--db":
            skip = True
        elif not arg.startswith("-"):
            return i
    return None


def prepare_environment() -> None:
    """Create sqlq's tables if need be, and set what worker processes inherit."""
    from django.conf import settings

    from sqlq.contrib.django.queue import queue

    config = queue.config
    queue.get()  # a shared Django database gets sqlq's tables now (init)
    queue.close()
    if config.sqlite3:
        os.environ["SQLQ_SQLITE_DRIVER"] = "sqlite3"
    if config.password is not None:
        os.environ["PGPASSWORD"] = config.password
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", settings.SETTINGS_MODULE)
    project = os.path.abspath(sys.path[0] or os.getcwd())  # manage.py's directory
    paths = os.environ.get("PYTHONPATH", "").split(os.pathsep)
    if project not in paths:
        os.environ["PYTHONPATH"] = os.pathsep.join(p for p in [project, *paths] if p)


def run(args: list[str], prog_name: str) -> int:
    """Run ``sqlq ARGS`` on the configured queue in this process; its exit status."""
    import click

    import sqlq
    from sqlq.cli import cli, exit_code_for

    try:
        prepare_environment()
    except (sqlq.Error, OSError, ValueError) as exc:  # one line, as the sqlq command says it
        code, message = exit_code_for(exc)
        click.echo(message, err=True)
        return code
    code = cli.main(args=sqlq_argv(args), prog_name=prog_name, standalone_mode=False)
    return int(code or 0)


class Command(BaseCommand):  # type: ignore[misc]  # Django ships no types
    help = ("The sqlq command line on the queue of settings.SQLQ: work, top, stats, "
            "dashboard, peek, kick... ('manage.py sqlq --help' lists them).")

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("args", nargs=argparse.REMAINDER, help="sqlq's own arguments")

    def run_from_argv(self, argv: list[str]) -> None:
        """``manage.py sqlq ...``: sqlq's own command line parses everything after
        ``sqlq`` (Django's parser would refuse its options)."""
        prog = f"{os.path.basename(argv[0])} {argv[1]}"
        sys.exit(run(argv[2:], prog))

    def handle(self, *args: Any, **options: Any) -> None:
        """``call_command("sqlq", "stats")``: a non-zero status is a CommandError."""
        code = run([str(a) for a in args], "sqlq")
        if code:
            raise CommandError(f"sqlq exited with status {code}", returncode=code)
