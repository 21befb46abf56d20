"""The entry points: ``serve()`` (behind ``sqlq serve``) and ``sqlq-beanstalkd``.

``sqlq-beanstalkd`` listens before it has even imported the Queue, and opens
its file in a thread while the loop already accepts and buffers commands;
commands that came in meanwhile are timed from their arrival (``Server.attach``).
"""

from __future__ import annotations

import os
import signal
import sys

from sqlq.server.core import Server
from sqlq.server.flags import USAGE, Flags, UsageError, parse_flags
from sqlq.server.loop import log
from sqlq.server.net import DEFAULT_LISTEN, raise_fd_limit
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
    _run(server, handle_signals)


def _run(server: Server, handle_signals: bool) -> None:
    raise_fd_limit()
    _import_what_serving_uses()
    if handle_signals:
        catch_signals(server)
    try:
        server.run()
    finally:
        if handle_signals:
            signal.set_wakeup_fd(-1)


def _import_what_serving_uses() -> None:
    """Import what the library loads on first use and serving uses (logging for its log
    lines, json for a reserve's watch list) now, once the port listens and before the
    loop runs: later, a full descriptor table (accept's EMFILE, which the loop rides
    out) would make the import fail, since it must open the module's file."""
    import json  # noqa: F401
    import logging  # noqa: F401


def catch_signals(server: Server) -> None:
    """SIGTERM and SIGINT stop the server cleanly, SIGUSR1 enters drain mode."""
    signal.set_wakeup_fd(server.loop.wakeup_fd(), warn_on_full_buffer=False)
    signal.signal(signal.SIGTERM, lambda *_: server.stop())
    signal.signal(signal.SIGINT, lambda *_: server.stop())
    signal.signal(signal.SIGUSR1, lambda *_: server.drain())


def beanstalkd_main(argv: list[str] | None = None) -> None:
    """``sqlq-beanstalkd``: beanstalkd's command line, served from a SQLite file.

    It listens first and opens the file in a thread meanwhile: clients may connect
    as soon as it is started (greenstalk's tests do, 100 ms after), and the imports
    and the schema take longer than that on a small machine.
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
        from sqlq.server.processes import beanstalkd_group

        sys.exit(beanstalkd_group(flags))
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


def binlog_location(directory: str) -> str:
    """Where ``-b DIR`` keeps the jobs: ``DIR/sqlq.db``, or DIR itself when it is a URL."""
    from sqlq.backends import is_url

    if is_url(directory):
        return directory
    os.makedirs(directory, exist_ok=True)
    return os.path.join(directory, "sqlq.db")


def open_binlog(directory: str, flags: Flags) -> Queue:
    """The Queue ``sqlq-beanstalkd -b DIR`` serves, with its flags' durability and size."""
    from sqlq.queue import Queue

    return Queue(binlog_location(directory), durability=flags.durability,
                 max_job_size=flags.max_job_size)


def set_verbosity(verbose: int) -> None:
    """``-V``: warnings and up by default, -V info, -VV debug."""
    if verbose:
        import logging

        logging.basicConfig(level=logging.WARNING - 10 * min(verbose, 2),
                            format="sqlq-beanstalkd: %(message)s")


def serve_opening(server: Server, open_queue: Callable[[], Queue],
                  address: str) -> BaseException | None:
    """Serve while ``open_queue()`` runs in a thread, until the server stops.

    Clients may connect meanwhile: their commands wait, and are timed from their
    arrival (``Server.attach``). Returns what ``open_queue`` raised (the server
    stops at once then), or None.
    """
    import threading

    opened: list[Queue] = []
    failed: list[BaseException] = []

    def load() -> None:
        try:
            queue = open_queue()
            opened.append(queue)
            server.loop.call_soon_threadsafe(lambda: server.attach(queue))
            log().info("listening on %s, jobs in %s (%s)", address, queue.location,
                       queue.durability)
        except BaseException as e:  # reported by the caller, once the loop has stopped
            failed.append(e)
            server.stop()

    loader = threading.Thread(target=load, name="sqlq-open", daemon=True)
    loader.start()
    try:
        _run(server, handle_signals=False)
    finally:
        signal.set_wakeup_fd(-1)
        loader.join()
        for queue in opened:
            queue.close()
    return failed[0] if failed else None
