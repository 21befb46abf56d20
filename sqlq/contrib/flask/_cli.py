"""``flask sqlq …``: the ``sqlq`` command's own click group, run on the app's queue.

Nothing is rewritten: the arguments go to ``sqlq.cli.cli`` with ``--db`` set to the
app's queue and the app's open Queue as the group's object, so every command
(``work``, ``top``, ``dashboard``, ``stats``...), its help, its output and its exit
codes are the ``sqlq`` command's, and a shared SQLite file is read through the
app's own SQLite library. ``flask sqlq work`` without ``--import`` or a command
imports the modules that declare the extension's tasks; its worker processes
(``python -m sqlq``) find the app through ``$FLASK_APP``, set here from ``--app``,
and open the queue with ``--init`` when the extension would create it or add its
tables to the app's database: started before the web app has served a request,
they would otherwise refuse it.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Protocol, cast

import click
from flask import g, has_app_context
from flask.cli import ScriptInfo

from ...backends import exists
from ...errors import Error

if TYPE_CHECKING:
    from flask import Flask

    from ...queue import Queue
    from ._database import Settings

#: Set on ``g`` by ``flask sqlq``: the context Flask's CLI pushed for the whole command,
#: which a worker's jobs must not share (each gets its own, see ``__init__.py``).
COMMAND_CONTEXT = "_sqlq_command"


class _AppObject(dict[str, Any]):
    """The sqlq group's ``ctx.obj``: the app's Queue, opened only when a command asks
    for it (``queue_from_ctx``), so ``flask sqlq --help`` or ``work``'s supervisor
    opens nothing. A missing file is left to ``queue_from_ctx``'s own rule (commands
    that only look refuse it; those that put create it)."""

    def __init__(self, location: str, open_queue: Callable[[], Any]) -> None:
        super().__init__()
        self._location = location
        self._open_queue = open_queue

    def get(self, key: str, default: Any = None) -> Any:
        if key == "queue" and key not in self and exists(self._location):
            self[key] = self._open_queue()
        return super().get(key, default)


def _command_index(args: Sequence[str]) -> int | None:
    """Where the sqlq command's name is in args (after the group's options)."""
    i = 0
    while i < len(args):
        if args[i] == "--db":
            i += 2
        elif args[i].startswith("-"):
            i += 1
        else:
            return i
    return None


def with_task_modules(args: Sequence[str], modules: Sequence[str]) -> list[str]:
    """args, with ``--import`` of each task module after ``work`` when it was given
    neither ``--import`` nor ``-- COMMAND``."""
    args = list(args)
    at = _command_index(args)
    if at is None or args[at] != "work" or not modules:
        return args
    rest = args[at + 1:]
    if "--" in rest or any(a in ("--import", "-i") or a.startswith(("--import=", "-i"))
                           for a in rest):
        return args
    imports = [arg for module in modules for arg in ("--import", module)]
    return [*args[:at + 1], *imports, *rest]


def with_init(args: Sequence[str]) -> list[str]:
    """args, with ``--init`` after ``work``: a worker opens the app's queue as the
    extension does (sqlq's tables added to the app's database, a missing file created),
    whether or not the web app has opened it yet."""
    args = list(args)
    at = _command_index(args)
    if at is None or args[at] != "work":
        return args
    rest = args[at + 1:]
    if "--init" in rest[:rest.index("--")] if "--" in rest else "--init" in rest:
        return args
    return [*args[:at + 1], "--init", *rest]


class Extension(Protocol):
    """What the command asks of the extension (``Sqlq``: a protocol here, so this module
    stands below the package that imports it)."""

    @property
    def tasks_queue(self) -> object: ...

    def settings(self, app: Flask | None = None) -> Settings: ...

    def queue_of(self, app: Flask) -> Queue: ...


def make_command(ext: Extension) -> click.Command:
    """The ``sqlq`` command of ``app.cli`` for this extension."""

    @click.command("sqlq", add_help_option=False, context_settings={
        "ignore_unknown_options": True, "allow_extra_args": True})
    @click.argument("args", nargs=-1, type=click.UNPROCESSED)
    @click.pass_context
    def sqlq_command(ctx: click.Context, args: tuple[str, ...]) -> None:
        """sqlq's commands (work, top, dashboard, stats...) on this app's queue."""
        from ...cli import cli, exit_code_for
        from ...tasks.task import REGISTRY

        info = ctx.ensure_object(ScriptInfo)
        app = info.load_app()
        if info.app_import_path:
            os.environ["FLASK_APP"] = info.app_import_path  # for work's processes
        try:
            with app.app_context():
                settings = ext.settings(app)
                location = settings.location
        except Error as exc:  # as the sqlq command says it: one line, its exit code
            code, message = exit_code_for(exc)
            click.echo(message, err=True)
            ctx.exit(code)
        if has_app_context():
            g.setdefault(COMMAND_CONTEXT, True)
        modules = sorted({t.fn.__module__ for t in REGISTRY.values()
                          if t.queue is cast(Any, ext.tasks_queue)})
        argv = ["--db", location, *with_task_modules(args, modules)]
        if settings.shared or not exists(location):  # as queue_of opens it
            argv = with_init(argv)
        code = cli.main(argv, prog_name=ctx.command_path, standalone_mode=False,
                        obj=_AppObject(location, lambda: ext.queue_of(app)))
        ctx.exit(code if isinstance(code, int) else 0)

    return sqlq_command


__all__ = ["COMMAND_CONTEXT", "make_command", "with_init", "with_task_modules"]
