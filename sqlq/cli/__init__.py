"""The ``sqlq`` command: one thin click command per Queue method.

Each command gets the queue from :func:`queue_from_ctx`, makes one call and prints the
result through :func:`emit`, so plain text and ``--json`` agree across commands. Errors
become exit codes in one place, :meth:`SqlqGroup.main` (0 ok, 1 error, 2 usage, 3 not
found, 4 timed out), printed as one line on stderr, never a traceback (``SQLQ_DEBUG=1``
shows it). The package, a module per job:

- ``exits.py``: errors to exit codes (:func:`exit_code_for`, :class:`SqlqGroup`);
- ``options.py``: the shared option decorators and types, :func:`queue_from_ctx`;
- ``group.py``: the ``sqlq`` group itself (``cli``), which imports a command's module
  only when that command runs (``index.py`` names each command's module and summary);
- ``puts.py``, ``jobs.py``, ``control.py``, ``topics.py``, ``admin.py``, ``limits.py``,
  ``backup.py``, ``serve.py``, ``work.py``: the commands: putting jobs, on jobs, on running
  jobs (cancel, progress), on
  topics, on the whole queue, on flow control, its backups, the servers and viewers, and
  the worker;
- ``output.py``: how the commands print (:func:`emit`: text, ``--json``, ``--raw``);
- ``top.py``: ``sqlq top``, the live view of every tube.

A new command is one function in one of those, using the shared decorators, and a
line in ``index.py`` (tests/unit/test_lazy_loading.py prints it)::

    @cli.command()
    @tube_option
    @json_option
    @click.pass_context
    def frob(ctx: click.Context, tube: str, as_json: bool) -> None:
        \"\"\"Frob a tube.  Example:  sqlq frob --tube emails\"\"\"
        emit(queue_from_ctx(ctx).frob(tube), as_json)

Bodies: plain output shows printable UTF-8 as it is and escapes the rest (``\\xNN``) so
a binary body cannot garble or drive the terminal; ``--raw`` writes the exact bytes and
nothing else; ``--json`` gives ``body`` as text (``"body_encoding": "utf-8"``) or base64
(``"base64"``). See docs/shell.md.
"""

from __future__ import annotations

from .exits import (
    EXIT_BROKEN_PIPE,
    EXIT_ERROR,
    EXIT_INTERRUPTED,
    EXIT_NOT_FOUND,
    EXIT_OK,
    EXIT_TIMEOUT,
    EXIT_USAGE,
    Interrupted,
    SqlqGroup,
    exit_code_for,
)
from .group import cli
from .options import DEFAULT_DB, OWN_PROCESS, queue_from_ctx


def main() -> None:
    """The ``sqlq`` console script and ``python -m sqlq``."""
    cli.main(prog_name="sqlq", obj={OWN_PROCESS: True})


__all__ = ["DEFAULT_DB", "EXIT_BROKEN_PIPE", "EXIT_ERROR", "EXIT_INTERRUPTED", "EXIT_NOT_FOUND",
           "EXIT_OK", "EXIT_TIMEOUT", "EXIT_USAGE", "Interrupted", "SqlqGroup", "cli",
           "exit_code_for", "main", "queue_from_ctx"]
