"""``sqlq work --processes N``: N worker processes under one supervisor (huey's consumer).

Each worker runs ``sqlq work --in-process ...``: it imports the task modules and opens
its Queue itself. Started by the ``sqlq`` command with no other thread running
(``WorkConfig.fork``: ``cli/options.may_fork``), the supervisor forks it
(``core/forking.py``): the supervisor holds nothing that must not cross a fork (it opens no Queue,
runs no thread of its own, and never imports a task module: ``command.py`` checks them
in a child of its own), so a worker starts in a few milliseconds instead of an interpreter's
start (0.2-0.35 s of CPU) and shares the supervisor's memory until it writes to it. A
restarted worker then runs the sqlq the supervisor loaded (a task module is imported
afresh by each worker). Run from another program (``manage.py sqlq work``, whose
process has set Django up and imported the apps' tasks; ``call_command``), the
supervisor cannot vouch for its process, and starts each worker as a new ``python -m
sqlq`` interpreter instead. Either way a crashed worker costs nothing but a restart,
and a SIGKILLed one's reservations come back at once through the core's owner files.

The supervisor sleeps in ``select`` on the signal wake-up pipe: SIGCHLD (a child
ended), SIGTERM/SIGINT (stop), or the time of a scheduled restart. Handlers only
set flags. A child that dies is restarted after a back-off that doubles with each
quick death (a module that fails to import costs a few lines a minute, not a
spinning CPU) and resets once a child has run for a while.

Stopping: SIGTERM or SIGINT is passed on to every child once; each stops
reserving, lets its running job finish within ``--grace`` and releases it
otherwise. Children that are still there a little after that are killed, and
the supervisor exits 0. Children live in their own process group, so a Ctrl-C
at the terminal reaches them once, through the supervisor, not twice; and they
stop by themselves if the supervisor disappears.

A worker that runs a COMMAND tells the supervisor, on a pipe, the process group of
the command it runs (``shell.GroupReport``). When such a worker dies, the supervisor
kills that group before it starts another worker: the job, given back by the death,
must not run twice at once. (The command itself also dies with its worker, through
``PR_SET_PDEATHSIG``; the group kill takes what it started too.)
"""

from __future__ import annotations

import contextlib
import logging
import os
import runpy
import select
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from types import FrameType
from typing import Any

from ..backends import is_url, redact
from ..core.forking import ChildExit, Forked, fork, restore_signals
from .config import WorkConfig
from .shell import REPORT_FD_ENV, describe_status

log = logging.getLogger("sqlq.supervisor")

#: Restart back-off: first delay, cap (seconds), and the run time that resets it.
RESTART_FIRST, RESTART_MAX, RESTART_RESET = 0.5, 30.0, 10.0
#: Seconds past the grace period before children that did not exit are killed.
KILL_SLACK = 5.0
#: Set in children's environment: the supervisor's pid (see Worker's orphan check).
SUPERVISOR_ENV = "SQLQ_SUPERVISOR_PID"


@dataclass
class _Slot:
    """One of the N places for a worker process."""

    index: int
    proc: subprocess.Popen[bytes] | Forked | None = None
    started: float = 0.0
    failures: int = 0
    restart_at: float | None = 0.0   # when to (re)start it; None: do not
    exited: bool = False             # ended with status 0 in burst mode: finished


class Supervisor:
    """Runs ``config.processes`` workers on ``db`` until stopped.

    Args:
        config: the ``sqlq work`` options, passed on to every child.
        db: the database file the children open.
    """

    def __init__(self, config: WorkConfig, db: str) -> None:
        self.config = config
        self.db = db
        self.slots = [_Slot(i) for i in range(config.processes)]
        self.stopping = False
        self.signals = 0
        self._forwarded = 0
        #: Each worker's running command group (shell.GroupReport), and the pipe it comes on.
        self._groups: dict[int, int] = {}
        self._report_r, self._report_w = os.pipe()
        self._report_buffer = b""
        #: What a forked worker undoes: the signal handlers before the supervisor's, and
        #: the wake-up pipe's descriptors (set by run).
        self._previous: dict[int, Any] = {}
        self._wake: tuple[int, int] = (-1, -1)

    # -- signals -----------------------------------------------------------------------------

    def _on_stop(self, signum: int, frame: FrameType | None) -> None:
        self.stopping = True
        self.signals += 1

    def _on_child(self, signum: int, frame: FrameType | None) -> None:
        pass  # the wake-up fd has done the work: select returns

    # -- the loop ----------------------------------------------------------------------------

    def run(self) -> int:
        """Supervise until stopped (or, with ``--burst``, until every child finished); 0."""
        wake_r, wake_w = os.pipe()
        os.set_blocking(wake_r, False)
        os.set_blocking(wake_w, False)
        previous = signal.set_wakeup_fd(wake_w, warn_on_full_buffer=False)
        handlers = self._previous = {sig: signal.signal(sig, handler) for sig, handler in (
            (signal.SIGTERM, self._on_stop), (signal.SIGINT, self._on_stop),
            (signal.SIGCHLD, self._on_child))}
        self._wake = (wake_r, wake_w)
        where = redact(self.db) if is_url(self.db) else os.path.abspath(self.db)
        count = len(self.slots)
        log.info("supervisor %d: %d worker%s on %s", os.getpid(), count, "s" * (count != 1),
                 where, extra={"pid": os.getpid()})
        os.set_blocking(self._report_r, False)
        os.set_blocking(self._report_w, False)  # a worker never waits for us to read
        try:
            self._loop(wake_r)
        finally:
            for sig, handler in handlers.items():
                signal.signal(sig, handler)
            signal.set_wakeup_fd(previous)
            for fd in (wake_r, wake_w, self._report_r, self._report_w):
                os.close(fd)
        log.info("supervisor %d stopped", os.getpid(), extra={"pid": os.getpid()})
        return 0

    def _loop(self, wake_r: int) -> None:
        kill_at: float | None = None  # when stopping: when to SIGKILL what is left
        while True:
            self._read_reports()
            self._reap()
            now = time.monotonic()
            if self.stopping:
                if self.signals > self._forwarded:  # pass each stop signal on, once
                    self._forwarded = self.signals
                    self._signal_children(signal.SIGTERM)
                    if kill_at is None:
                        kill_at = now + self.config.grace + KILL_SLACK
                if not self._alive():
                    return
                if kill_at is not None and now >= kill_at:
                    log.warning("workers still running %.0fs after the grace period: killing "
                                "them", KILL_SLACK)
                    self._signal_children(signal.SIGKILL)
                    kill_at = None  # wait for their SIGCHLD now
            else:
                self._start_due(now)
                if self.config.burst and all(s.exited for s in self.slots):
                    return
            timeout = self._next_event(kill_at)
            with contextlib.suppress(InterruptedError):
                select.select([wake_r, self._report_r], [], [], timeout)
            with contextlib.suppress(BlockingIOError):
                while os.read(wake_r, 512):
                    pass

    def _next_event(self, kill_at: float | None) -> float | None:
        if self.stopping:
            times = [kill_at] if kill_at is not None else []
        else:
            times = [s.restart_at for s in self.slots
                     if s.proc is None and s.restart_at is not None]
        if not times:
            return None
        return max(0.0, min(times) - time.monotonic())

    def _alive(self) -> bool:
        return any(s.proc is not None for s in self.slots)

    def _start_due(self, now: float) -> None:
        for slot in self.slots:
            if slot.proc is None and slot.restart_at is not None and slot.restart_at <= now:
                self._start(slot)

    def _start(self, slot: _Slot) -> None:
        args = self.config.child_args(self.db)
        try:
            slot.proc = self._fork(args) if self.config.fork else subprocess.Popen(
                [sys.executable, "-m", "sqlq", *args], start_new_session=True,
                env=dict(os.environ, **{SUPERVISOR_ENV: str(os.getpid()),
                                        REPORT_FD_ENV: str(self._report_w)}),
                pass_fds=(self._report_w,))
        except OSError as exc:
            log.error("cannot start worker %d: %s", slot.index, exc)
            self._schedule_restart(slot, time.monotonic())
            return
        slot.started = time.monotonic()
        slot.restart_at = None
        log.debug("worker %d started (pid %d)", slot.index, slot.proc.pid,
                  extra={"pid": slot.proc.pid})

    def _fork(self, args: list[str]) -> Forked:
        pid = fork()
        if pid == 0:
            with ChildExit():
                self._become_worker(args)
        return Forked(pid)

    def _become_worker(self, args: list[str]) -> None:
        """In a forked child: undo what is the supervisor's (its session, signal handlers,
        wake-up pipe and the reports' read end), then run ``python -m sqlq ARGS`` in this
        process (the same entry a new interpreter runs: ``sqlq/__main__.py``)."""
        os.setsid()  # its own group: a Ctrl-C reaches it once, through the supervisor
        restore_signals(self._previous)
        for fd in (*self._wake, self._report_r):
            os.close(fd)
        os.environ[SUPERVISOR_ENV] = str(os.getppid())
        os.environ[REPORT_FD_ENV] = str(self._report_w)
        sys.argv = ["sqlq", *args]
        runpy.run_module("sqlq", run_name="__main__", alter_sys=True)

    def _reap(self) -> None:
        for slot in self.slots:
            code = None if slot.proc is None else slot.proc.poll()
            if slot.proc is None or code is None:
                continue
            pid = slot.proc.pid
            slot.proc = None
            self._kill_group_of(pid)
            now = time.monotonic()
            if self.stopping:
                continue
            if code == 0 and self.config.burst:
                slot.exited = True
                continue
            self._schedule_restart(slot, now)
            log.warning("worker %d (pid %d) ended: %s; restarting it in %.1fs",
                        slot.index, pid, describe_status(code), (slot.restart_at or now) - now,
                        extra={"pid": pid, "exit": code})

    def _read_reports(self) -> None:
        """Take in the workers' messages: which command group each runs now."""
        with contextlib.suppress(BlockingIOError):
            while chunk := os.read(self._report_r, 4096):
                self._report_buffer += chunk
        *complete, self._report_buffer = self._report_buffer.split(b"\n")
        for line in complete:
            worker, _, pgid = line.partition(b" ")
            if worker.isdigit() and pgid.isdigit():
                self._groups[int(worker)] = int(pgid)

    def _kill_group_of(self, pid: int) -> None:
        """SIGKILL the group of the command the dead worker ``pid`` was running, if any.

        The message that it ended may not have been sent (the worker died just after
        reaping it): the group is then already empty, or, if its number was reused
        in that instant, very unlikely to be a group of this user's.
        """
        pgid = self._groups.pop(pid, 0)
        if pgid > 0:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pgid, signal.SIGKILL)
                log.warning("worker (pid %d) died while its command ran: killed the command's "
                            "process group %d", pid, pgid, extra={"pid": pid})

    def _schedule_restart(self, slot: _Slot, now: float) -> None:
        if now - slot.started >= RESTART_RESET:
            slot.failures = 0
        delay = min(RESTART_MAX, RESTART_FIRST * 2 ** slot.failures)
        slot.failures += 1
        slot.restart_at = now + delay

    def _signal_children(self, sig: signal.Signals) -> None:
        for slot in self.slots:
            if slot.proc is not None and slot.proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    slot.proc.send_signal(sig)
