"""The watchdog: heartbeat and grace period for a task that runs in the main thread.

Handing each task to another thread costs two thread wake-ups per job, which is
more than the rest of the worker's overhead together (a no-op task drained 60%
faster without it). So a worker runs a task in its main thread and this one
thread keeps watch meanwhile:

* heartbeat: a job with keepalive is touched at 80% of its TTR (goqite's rule);
* grace: once a stop is requested, a task still running after ``grace`` seconds
  is given back to the queue and the process exits (a thread cannot be stopped);
* a job without keepalive that outlives its TTR is reported once;
* prefetch: the jobs the worker holds meanwhile (waiting in its batch, or done and
  not yet acknowledged) are touched 80% into their TTR (see prefetch.py).

The watchdog learns of SIGTERM/SIGINT through the signal wake-up fd, written by
the C-level handler at once, so the grace period holds even while the main thread
is stuck in a C call and Python's own handler has not run yet. When no job runs
it sleeps in ``select`` without a timeout: an idle worker costs no wake-ups here.
"""

from __future__ import annotations

import contextlib
import logging
import os
import select
import signal
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..errors import Disconnected, JobLost
from ..model import Job

if TYPE_CHECKING:
    from .prefetch import Holding

log = logging.getLogger("sqlq.worker")

#: While a job runs, the watchdog looks at the stop flag this often (seconds).
POLL = 0.25
#: A job with keepalive is touched when this fraction of its TTR has passed.
HEARTBEAT = 0.8
_STOP_SIGNALS = {signal.SIGTERM.value, signal.SIGINT.value}


@dataclass(slots=True)  # one per job: made and read faster without a __dict__
class _Watch:
    job: Job
    name: str
    keepalive: bool
    next_touch: float
    warned: bool = False


class Watchdog:
    """Watches the job the main thread runs (see the module docstring).

    Args:
        grace: seconds a running job may go on after a stop is requested.
        stopping: returns (stop requested, hurry: skip the grace), from the worker's flags.
        give_back: called with the job when the grace period runs out, before the exit.
        signal_fd: the read end of the signal wake-up pipe, if the worker set one.
        holding: the jobs the worker holds besides the running one, kept alive meanwhile.
    """

    def __init__(self, grace: float, stopping: Callable[[], tuple[bool, bool]],
                 give_back: Callable[[Job, str], None], signal_fd: int | None = None,
                 holding: Holding | None = None) -> None:
        self.grace = grace
        self._holding = holding
        self._stopping = stopping
        self._give_back = give_back
        self._signal_fd = signal_fd
        self._arm_r, self._arm_w = os.pipe()
        os.set_blocking(self._arm_r, False)
        os.set_blocking(self._arm_w, False)
        self._watch: _Watch | None = None
        self._idle = False
        self._closed = False
        self._signals = 0          # stop signals seen on the wake-up fd
        self._stop_at: float | None = None
        self._thread = threading.Thread(target=self._run, name="sqlq-watchdog", daemon=True)
        self._thread.start()

    def arm(self, job: Job, name: str, keepalive: bool) -> None:
        """Watch ``job`` from now until :meth:`disarm`."""
        self._watch = _Watch(job, name, keepalive, time.monotonic() + HEARTBEAT * job.ttr)
        if self._idle:
            self._poke()

    def disarm(self) -> None:
        """The job ended (the watchdog goes back to sleep at its next wake-up)."""
        self._watch = None

    def close(self) -> None:
        """Stop the thread."""
        self._closed = True
        self._poke()
        self._thread.join(2)
        os.close(self._arm_r)
        os.close(self._arm_w)

    def _poke(self) -> None:
        with contextlib.suppress(BlockingIOError, OSError):
            os.write(self._arm_w, b"x")

    def _run(self) -> None:
        fds = [self._arm_r] + ([self._signal_fd] if self._signal_fd is not None else [])
        while not self._closed:
            watch = self._watch
            self._idle = watch is None
            if self._idle and self._watch is not None:
                continue  # armed between the look and the flag: look again
            timeout = None if watch is None else self._timeout(watch)
            readable, _, _ = select.select(fds, [], [], timeout)
            self._drain(readable)
            watch = self._watch
            if watch is not None and not self._closed:
                self._check(watch)

    def _drain(self, readable: list[int]) -> None:
        for fd in readable:
            with contextlib.suppress(BlockingIOError, OSError):
                data = os.read(fd, 512)
                if fd == self._signal_fd:
                    self._signals += sum(1 for b in data if b in _STOP_SIGNALS)

    def _stop_state(self) -> tuple[bool, bool]:
        stopping, hurry = self._stopping()
        stopping = stopping or self._signals > 0
        if stopping and self._stop_at is None:
            self._stop_at = time.monotonic()
        return stopping, hurry or self._signals > 1

    def _timeout(self, watch: _Watch) -> float:
        now = time.monotonic()
        waits = [POLL]
        if watch.keepalive:
            waits.append(watch.next_touch - now)
        if self._stop_at is not None:
            waits.append(self._stop_at + self.grace - now)
        held = self._holding.touch_in() if self._holding is not None else None
        if held is not None:
            waits.append(held)
        return max(0.0, min(waits))

    def _check(self, watch: _Watch) -> None:
        now = time.monotonic()
        stopping, hurry = self._stop_state()
        grace_over = hurry or now >= (self._stop_at or now) + self.grace
        if stopping and grace_over and self._watch is watch:  # and not finished meanwhile
            self._give_back(watch.job, "the grace period ran out")
            logging.shutdown()
            os._exit(0)
        if self._holding is not None:
            self._holding.touch_due()
        if watch.keepalive and now >= watch.next_touch:
            watch.next_touch = now + HEARTBEAT * watch.job.ttr
            try:
                watch.job.touch()
            except JobLost:
                watch.keepalive = False
                log.warning("job %d %s lost its reservation while running; it may run again",
                            watch.job.id, watch.name)
            except Disconnected as exc:  # the lease stands; the next heartbeat tries again
                log.warning("job %d %s: could not touch it (%s)", watch.job.id, watch.name, exc)
            else:
                log.debug("job %d touched", watch.job.id)
        elif not watch.keepalive and not watch.warned and watch.job.reserved_until is not None \
                and time.time() * 1000 >= watch.job.reserved_until:
            watch.warned = True
            log.warning("job %d %s is still running past its TTR of %gs: it may be run again "
                        "elsewhere (give the task keepalive=True)", watch.job.id, watch.name,
                        watch.job.ttr)
