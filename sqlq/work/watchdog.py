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
  not yet acknowledged) are touched 80% into their TTR (see prefetch.py);
* presence: the worker's row in the workers registry says which job runs once it has
  run a second, and its heartbeat stays fresh (presence.py), though the main thread,
  which beats between jobs, is busy in the task;
* cancel: once a second it looks whether the running job (or one of the batch) was
  cancelled (cancel.py) and marks it, so that the task's next ``sqlq.current_job()``
  raises JobCancelled; past the task's ``timeout=`` it marks the run so that the next
  look raises ``sqlq.Timeout`` (a thread cannot be stopped from outside).

The decisions and their log lines are :mod:`sqlq.work.heartbeat`'s (the policy the
worker's other drivers follow too); this thread only waits and acts on them.

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

from .. import control
from ..model import Job
from .cancel import CancelCheck, log_cancelled
from .heartbeat import STOP, TOUCH, Clock, Grace, Heartbeat, log, wake_in
from .prefetch import Holding

_STOP_SIGNALS = {signal.SIGTERM.value, signal.SIGINT.value}
#: A run the main thread armed the watchdog for: (job, name, keepalive, started, timeout).
_Armed = tuple[Job, str, bool, float, float | None]


class Watchdog:
    """Watches the job the main thread runs (see the module docstring).

    Args:
        grace: the worker's grace period (its state shared with the worker's loop).
        stopping: returns (stop requested, hurry: skip the grace), from the worker's flags.
        give_back: called with the job when the grace period runs out, before the exit.
        signal_fd: the read end of the signal wake-up pipe, if the worker set one.
        holding: the jobs the worker holds besides the running one, kept alive meanwhile.
        clock: the queue's clock (ms), the time of the jobs' leases.
        cancels: the worker's look for cancelled jobs.
        beat: called at each look while a job runs: writes the worker's row if it is due
            (:meth:`sqlq.work.presence.Presence.beat_if_due`).
    """

    def __init__(self, grace: Grace, stopping: Callable[[], tuple[bool, bool]],
                 give_back: Callable[[Job, str], None], signal_fd: int | None,
                 holding: Holding, clock: Clock, cancels: CancelCheck,
                 beat: Callable[[], None] | None = None) -> None:
        self.grace = grace
        self._beat_if_due = beat
        self._cancels = cancels
        self._holding = holding
        self._clock = clock
        self._stopping = stopping
        self._give_back = give_back
        self._signal_fd = signal_fd
        self._arm_r, self._arm_w = os.pipe()
        os.set_blocking(self._arm_r, False)
        os.set_blocking(self._arm_w, False)
        self._armed: _Armed | None = None
        #: The policy of the armed run, made by this thread when it first looks at it: most
        #: runs end first, and then arming costs the main thread a tuple, not an object.
        self._beat: tuple[_Armed, Heartbeat] | None = None
        self._idle = False
        self._closed = False
        self._signals = 0          # stop signals seen on the wake-up fd
        self._thread = threading.Thread(target=self._run, name="sqlq-watchdog", daemon=True)
        self._thread.start()

    def arm(self, job: Job, name: str, keepalive: bool, timeout: float | None = None) -> None:
        """Watch ``job`` from now until :meth:`disarm` (``timeout``: the task's)."""
        self._armed = (job, name, keepalive, time.monotonic(), timeout)
        if self._idle:
            self._poke()

    def disarm(self) -> None:
        """The job ended (the watchdog goes back to sleep at its next wake-up)."""
        self._armed = None

    def _policy(self, armed: _Armed) -> Heartbeat:
        """The heartbeat policy of the armed run, kept from one look to the next."""
        if self._beat is None or self._beat[0] is not armed:
            job, name, keepalive, started, timeout = armed
            self._beat = (armed, Heartbeat(job, name, keepalive, False, self._clock, started,
                                           timeout))
        return self._beat[1]

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
            armed = self._armed
            self._idle = armed is None
            if self._idle and self._armed is not None:
                continue  # armed between the look and the flag: look again
            timeout = None if armed is None else wake_in(
                time.monotonic(), self._policy(armed), self.grace, self._holding.touch_in())
            readable, _, _ = select.select(fds, [], [], timeout)
            self._drain(readable)
            armed = self._armed
            if armed is not None and not self._closed:
                self._check(armed, self._policy(armed))

    def _drain(self, readable: list[int]) -> None:
        for fd in readable:
            with contextlib.suppress(BlockingIOError, OSError):
                data = os.read(fd, 512)
                if fd == self._signal_fd:
                    self._signals += sum(1 for b in data if b in _STOP_SIGNALS)

    def _check(self, armed: _Armed, beat: Heartbeat) -> None:
        now = time.monotonic()
        stopping, hurry = self._stopping()
        self.grace.update(now, stopping or self._signals > 0, hurry or self._signals > 1)
        if self.grace.over(now) and self._armed is armed:  # and not finished meanwhile
            self._give_back(beat.job, "the grace period ran out")
            logging.shutdown()
            os._exit(0)
        self._holding.touch_due()
        if self._beat_if_due is not None:
            self._beat_if_due()
        job = beat.job
        if job in self._cancels.check(now, [job, *self._holding.waiting]):
            log_cancelled(job, beat.name, "its next sqlq.current_job(), job.touch() or "
                          "job.progress() raises JobCancelled")
        step = beat.step(now)
        if step == TOUCH:
            beat.touch()
        elif step == STOP and beat.timeout is not None:  # a thread cannot be stopped: told
            control.mark_timed_out(job.id, beat.timeout)
            log.warning("job %d %s is still running after its timeout of %gs: its next "
                        "sqlq.current_job() raises sqlq.Timeout", job.id, beat.name,
                        beat.timeout)
