"""One server process's life, whichever entry point started it (``serve()``,
``sqlq-beanstalkd``, each child of ``--processes N``): its signals, its log level, where
``-b DIR`` keeps the jobs, and serving while its queue opens in a thread.

Apart from ``main.py`` (the entry points) so that ``processes.py``'s children, started
from there, run the same code without importing it back.
"""

from __future__ import annotations

import os
import signal

from sqlq.server.loop import log
from sqlq.server.net import raise_fd_limit

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable

    from sqlq.queue import Queue
    from sqlq.server.core import Server


def run(server: Server, handle_signals: bool) -> None:
    """Run the server's loop until it stops; ``handle_signals``: as :func:`catch_signals`."""
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


def binlog_location(directory: str) -> str:
    """Where ``-b DIR`` keeps the jobs: ``DIR/sqlq.db``, or DIR itself when it is a URL."""
    from sqlq.backends import is_url

    if is_url(directory):
        return directory
    os.makedirs(directory, exist_ok=True)
    return os.path.join(directory, "sqlq.db")


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
        run(server, handle_signals=False)
    finally:
        signal.set_wakeup_fd(-1)
        loader.join()
        for queue in opened:
            queue.close()
    return failed[0] if failed else None
