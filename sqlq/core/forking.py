"""Children forked from the command's own process, instead of started as new interpreters.

A new interpreter costs 0.2-0.35 s of CPU to import sqlq and its own copy of it in
memory; a fork costs milliseconds and shares the parent's pages until either writes
them. It is sound only where the parent holds nothing that must not cross a fork: no
thread, no open connection, no application module imported at its top level. The
callers vouch for that (``sqlq work``'s supervisor and ``sqlq serve --processes``'
parent, when they run as the ``sqlq`` command and not inside another program, and
:func:`sound` finds no other thread: one that an exporter or a sitecustomize started
makes them start new interpreters instead); each then undoes what is its own in the
child (signal handlers, wake-up pipes) and runs what a new interpreter would have run.
:class:`ChildExit` ends the child as an interpreter ends, and never lets it return into
the parent's code.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import signal
import sys
import threading
import time
import traceback
from collections.abc import Mapping
from types import TracebackType
from typing import Any, NoReturn


def flush_output() -> None:
    """Flush stdout and stderr before a fork (or the child would write what is buffered
    again) and before a child's ``os._exit`` (which flushes nothing)."""
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()


def sound() -> bool:
    """Whether no thread but this one runs: a fork copies only the calling thread, with
    the locks the others held (a tracer's exporter, a pool's keeper) held for ever."""
    return threading.active_count() == 1


def restore_signals(previous: Mapping[int, Any]) -> None:
    """In a forked child: no wake-up descriptor, and the handlers its parent replaced
    (``previous``, as ``signal.signal`` returned them) back in place."""
    signal.set_wakeup_fd(-1)
    for sig, handler in previous.items():
        signal.signal(sig, handler)


def fork() -> int:
    """``os.fork()``, the output flushed first: 0 in the child, the child's pid in the parent."""
    flush_output()
    return os.fork()


class Forked:
    """A forked child, with the part of :class:`subprocess.Popen` a supervisor uses."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.returncode: int | None = None

    def poll(self) -> int | None:
        """Its exit status once it ended (reaped then), else None."""
        if self.returncode is None:
            try:
                pid, status = os.waitpid(self.pid, os.WNOHANG)
            except ChildProcessError:  # reaped elsewhere: its status is lost
                pid, status = self.pid, 255 << 8
            if pid:
                self.returncode = os.waitstatus_to_exitcode(status)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        """Its exit status, waiting up to ``timeout`` seconds (as Popen.wait, whose short
        naps it takes too: a child has no descriptor to sleep on).

        Raises:
            subprocess.TimeoutExpired: still running after ``timeout``.
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        nap = 0.0005
        while (code := self.poll()) is None:
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                import subprocess

                raise subprocess.TimeoutExpired(f"pid {self.pid}", timeout or 0.0)
            nap = min(nap * 2, 0.05, left if left is not None else 0.05)
            time.sleep(nap)
        return code

    def send_signal(self, sig: int) -> None:
        if self.returncode is None:  # not reaped: the pid is still its own
            os.kill(self.pid, sig)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)


class ChildExit:
    """``with ChildExit():`` around what a forked child runs: at the block's end the
    process exits, as an interpreter would (threads that are not daemons joined, atexit
    functions run, output flushed), with status 0, a SystemExit's, or 1 after printing
    any other exception. It never returns into the parent's code."""

    def __enter__(self) -> ChildExit:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> NoReturn:
        code = 0
        try:
            if isinstance(exc, SystemExit):  # the command's exit
                code = exc.code if isinstance(exc.code, int) else int(exc.code is not None)
            elif exc is not None:
                code = 1
                traceback.print_exception(kind, exc, tb)
            threading._shutdown()  # type: ignore[attr-defined]
            atexit._run_exitfuncs()
        except BaseException:  # noqa: BLE001 - the child's last word, then its exit
            code = code or 1
            traceback.print_exc()
        finally:
            flush_output()
            os._exit(code)
