"""The entry points: ``serve()`` (behind ``sqlq serve``) and ``sqlq-beanstalkd``.

``sqlq-beanstalkd`` listens before it has even imported the Queue, and opens
its file in a thread while the loop already accepts and buffers commands;
commands that came in meanwhile are timed from their arrival (``Server.attach``).
"""

from __future__ import annotations

import sys

from sqlq.server.core import Server
from sqlq.server.flags import USAGE, Flags, UsageError, parse_flags
from sqlq.server.loop import log
from sqlq.server.net import DEFAULT_LISTEN
from sqlq.server.running import binlog_location, catch_signals, run, serve_opening, set_verbosity
from sqlq.server.stats import sqlq_version, version

TYPE_CHECKING = False
if TYPE_CHECKING:
    import socket
    from collections.abc import Callable
    from typing import Any

    from sqlq.queue import Queue


def serve(queue: Queue, listen: str = DEFAULT_LISTEN, *, max_job_size: int | None = None,
          max_buffered: int | None = None, sock: socket.socket | None = None,
          ready: Callable[[str], Any] | None = None, handle_signals: bool = True) -> None:
    """Serve the beanstalkd protocol over ``queue`` until SIGTERM or SIGINT.

    The protocol has no authentication: anyone who can connect can read,
    delete and add jobs. The default address is loopback only.

    Args:
        queue: the Queue to serve; its file may be shared with library users.
        listen: ``HOST:PORT``, ``[V6]:PORT`` or ``unix:PATH`` (port 0: any free port).
        max_job_size: the largest body a put may announce; default the queue's.
        max_buffered: bytes all connections' put bodies may hold at once; default 64 MiB
            or four maximum-size bodies, whichever is more (see server/budget.py).
        sock: an already bound listening socket, instead of ``listen``.
        ready: called with the bound address once clients can connect.
        handle_signals: SIGTERM/SIGINT stop, SIGUSR1 enters drain mode (main thread only).
    """
    server = Server(queue, max_job_size=max_job_size, max_buffered=max_buffered)
    address = server.listen(listen, sock)
    log().info("listening on %s", address)
    if ready is not None:
        ready(address)
    run(server, handle_signals)


def beanstalkd_main(argv: list[str] | None = None) -> None:
    """``sqlq-beanstalkd``: beanstalkd's command line, served from a SQLite file.

    It listens first and opens the file in a thread meanwhile: clients may connect
    as soon as it is started (greenstalk's tests do, 100 ms after), and the imports
    and the schema take longer than that on a small machine. Without ``argv`` it is
    the program (the console script, ``python -m sqlq.server``), whose ``-P`` group
    forks its processes; with ``argv``, called from another program, it starts them
    as new interpreters.
    """
    try:
        flags = parse_flags(sys.argv[1:] if argv is None else argv)
    except UsageError as e:
        sys.stderr.write(f"sqlq-beanstalkd: {e}\n{USAGE}")
        sys.exit(5)
    if flags.show_help:
        sys.stdout.write(USAGE)
        return
    if flags.show_version:
        print(f"beanstalkd {version()} (sqlq {sqlq_version()})")
        return
    if flags.processes > 1:
        from sqlq.core.forking import sound
        from sqlq.server.processes import beanstalkd_group

        sys.exit(beanstalkd_group(flags, fork=argv is None and sound()))
    server = Server(None, max_job_size=flags.max_job_size)
    catch_signals(server)  # from the start: a SIGTERM must not leave a temporary directory
    try:
        address = server.listen(flags.listen)
    except (OSError, ValueError) as e:
        sys.stderr.write(f"sqlq-beanstalkd: cannot listen on {flags.listen}: {e}\n")
        sys.exit(1)
    import tempfile

    temp = None if flags.binlog_dir else tempfile.mkdtemp(prefix="sqlq-beanstalkd-")
    directory = flags.binlog_dir or temp
    assert directory is not None
    set_verbosity(flags.verbose)
    try:
        failed = serve_opening(server, lambda: open_binlog(directory, flags), address)
    finally:
        if temp is not None:
            import shutil

            shutil.rmtree(temp, ignore_errors=True)
    if failed is not None:
        sys.stderr.write(f"sqlq-beanstalkd: {failed}\n")
        sys.exit(1)


def open_binlog(directory: str, flags: Flags) -> Queue:
    """The Queue ``sqlq-beanstalkd -b DIR`` serves, with its flags' durability and size."""
    from sqlq.queue import Queue

    return Queue(binlog_location(directory), durability=flags.durability,
                 max_job_size=flags.max_job_size)
