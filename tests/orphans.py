"""Processes a test starts die with the test (found: chaos agents and ``sqlq work``
processes still running 50 minutes after the pytest that started them was killed).

On Linux a child asks the kernel for SIGKILL when its parent dies
(``prctl(PR_SET_PDEATHSIG)``); a parent gone before the ask (the child then belongs to
init or a subreaper) is caught by comparing the parent's pid with the one it was given
(or, for a child of the test process's fork server, tests/forkserver.py, which dies with
it, the parent's parent's).
Elsewhere nothing is done. sqlq's own processes are unchanged for users: a test's
``sqlq work`` runs through this module::

    python -m tests.orphans PARENT_PID -m sqlq --db DB work ...
"""

from __future__ import annotations

import ctypes
import os
import runpy
import signal
import sys

#: prctl(2)'s option: the signal sent to this process when its parent dies.
PR_SET_PDEATHSIG = 1


def die_with_parent(parent: int) -> None:
    """Be killed (SIGKILL) when process ``parent`` dies; exit now if it is gone already."""
    if sys.platform.startswith("linux"):
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_SET_PDEATHSIG)")
    if parent not in (os.getppid(), _parent_of(os.getppid())):  # (or its fork server's)
        os._exit(1)


def _parent_of(pid: int) -> int:
    """The parent of process ``pid`` (0 if it is gone)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8") as f:
            return int(f.read().rsplit(")", 1)[1].split()[1])
    except (OSError, ValueError, IndexError):
        return 0


def command(*args: str) -> list[str]:
    """``python ARGS`` as a child of this process that dies with it (args: ``-m module
    ...``)."""
    return [sys.executable, "-m", "tests.orphans", str(os.getpid()), *args]


def main() -> None:
    parent, flag, module, *rest = sys.argv[1:]
    assert flag == "-m", sys.argv
    die_with_parent(int(parent))
    sys.argv = [module, *rest]
    runpy.run_module(module, run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()
