"""``sqlq work -- COMMAND ARGS...``: one child process per job (rq's fork-and-kill "horse").

The child gets the body on stdin and ``SQLQ_JOB_ID``, ``SQLQ_TUBE``,
``SQLQ_ATTEMPT`` (1 on the first run), ``SQLQ_LEASE`` and ``SQLQ_DB`` in its
environment, so a script can ``sqlq touch "$SQLQ_JOB_ID"``, put follow-up jobs, or
skip what an earlier run did with ``sqlq step NAME -- CMD``. Exit status 0
deletes the job; anything else is a failure, retried with backoff and finally
buried with the exit status and the last line the command wrote to stderr; the
last lines of its stderr (up to 8 KiB) are kept as the attempt's traceback.

The child runs in its own session, hence its own process group: killing the group
at the TTR also stops whatever the command started (``sh -c 'a | b'``), and a
Ctrl-C meant for the worker does not reach it, so a stopping worker lets it finish
within the grace period instead.

The child does not outlive its worker: on Linux it asks the kernel for SIGKILL when
the worker dies (``PR_SET_PDEATHSIG``), and a supervisor that sees its worker die
kills the command's process group too (grandchildren included), before it starts
another worker that may run the same job again.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import subprocess
import sys
import threading
from collections import deque
from collections.abc import Callable, Sequence
from typing import IO

from ..attempts import TIMED_OUT, TRACEBACK_LIMIT
from ..core import tracing
from ..model import Job
from ..tasks.retry import RetryPolicy
from . import runner

#: How long the reader thread may lag behind the child's exit (stderr held open by a
#: grandchild must not hold the worker up).
_READER_JOIN = 0.2

#: Set in a supervisor's children: the write end of a pipe on which a worker tells its
#: supervisor the process group of the command it runs (see :class:`GroupReport`).
REPORT_FD_ENV = "SQLQ_SUPERVISOR_FD"

_PR_SET_PDEATHSIG = 1


def _prctl() -> Callable[..., int] | None:
    """libc's ``prctl``, looked up once in the worker (never in a forked child)."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        prctl: Callable[..., int] = ctypes.CDLL(None, use_errno=True).prctl
        return prctl
    except (OSError, AttributeError):
        return None


_PRCTL = _prctl()


def _die_with(parent: int, report: GroupReport | None) -> None:
    """In the child, before exec: tell the supervisor (if any) our group, then SIGKILL
    when the thread that forked us ends.

    The report is the child's own, before the command runs: the worker's, after Popen
    returns, came too late when the worker was killed as the command began, and what
    the command had started outlived it (test_shell_worker, under load). The kernel
    ties the signal to the *thread* that forked, hence only commands started from the
    main thread, which lives as long as the worker, are tied. If the worker died
    between the fork and this call, the child is already an orphan and the signal will
    never come: it kills itself instead of running the job.
    """
    assert _PRCTL is not None
    if report is not None:
        report.running(os.getpid(), parent)  # its own session: its pid is its group
    _PRCTL(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != parent:
        os.kill(os.getpid(), signal.SIGKILL)


class GroupReport:
    """The worker's side of a pipe to its supervisor: which command group it runs now.

    Each message is one line, ``"WORKER_PID PGID"`` (``PGID`` 0: none), shorter than
    ``PIPE_BUF`` so written at once. A worker SIGKILLed while its command runs cannot
    kill that command's group; its supervisor, which read the last message, does.
    A supervisor that is gone (EPIPE) or not reading (a full pipe) costs nothing
    but the message.
    """

    def __init__(self, fd: int) -> None:
        self.fd = fd

    @classmethod
    def from_environ(cls) -> GroupReport | None:
        """The report pipe a supervisor gave this process, if any."""
        value = os.environ.get(REPORT_FD_ENV, "")
        if not value.isdigit():
            return None
        fd = int(value)
        try:
            os.fstat(fd)
        except OSError:
            return None
        return cls(fd)

    def running(self, pgid: int, worker: int | None = None) -> None:
        """Tell the supervisor the command in process group ``pgid`` runs (0: none), for
        this worker (``worker``: its pid, when the command's child says it itself)."""
        with contextlib.suppress(OSError):
            os.write(self.fd, f"{worker or os.getpid()} {pgid}\n".encode())


def describe_status(code: int) -> str:
    """``exit status 3`` or ``killed by SIGKILL``, as a shell would put it."""
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit status {code}"


class _Stderr:
    """Copies the child's stderr to ours as it comes and keeps its last non-empty line,
    and its last lines up to :data:`~sqlq.attempts.TRACEBACK_LIMIT` characters (the
    failed attempt's "traceback")."""

    def __init__(self, stream: IO[bytes]) -> None:
        self.last_line = ""
        self._lines: deque[str] = deque()
        self._kept = 0  # characters in _lines
        self._stream = stream
        self._thread = threading.Thread(target=self._pump, name="sqlq-stderr", daemon=True)
        self._thread.start()

    def _pump(self) -> None:
        out = getattr(sys.stderr, "buffer", None)
        for line in iter(self._stream.readline, b""):
            text = line.decode("utf-8", "replace").strip()
            if text:
                self.last_line = text
            self._keep(line.decode("utf-8", "replace").rstrip("\r\n"))
            if out is not None:
                with contextlib.suppress(OSError, ValueError):
                    out.write(line)
                    out.flush()
        self._stream.close()

    def _keep(self, text: str) -> None:
        text = text[-TRACEBACK_LIMIT:]
        self._lines.append(text)
        self._kept += len(text) + 1
        while self._kept > TRACEBACK_LIMIT and len(self._lines) > 1:
            self._kept -= len(self._lines.popleft()) + 1

    @property
    def tail(self) -> str:
        """The last lines the command wrote to stderr (at most 8 KiB), empty lines at the
        end left out."""
        return "\n".join(list(self._lines)).rstrip()

    def join(self) -> None:
        self._thread.join(_READER_JOIN)


def _feed(stream: IO[bytes], body: bytes) -> None:
    # A command that never reads its stdin is fine: it gets EPIPE, we don't care.
    with contextlib.suppress(OSError, ValueError):
        stream.write(body)
    with contextlib.suppress(OSError, ValueError):
        stream.close()


class _ShellRun:
    """One child process running one job."""

    inline = False
    timeout: float | None = None  # the TTR (and --keepalive) bound a command

    def __init__(self, proc: subprocess.Popen[bytes], job: Job, name: str, policy: RetryPolicy,
                 keepalive: bool, report: GroupReport | None) -> None:
        self.name = name
        self.keepalive = keepalive
        self._proc = proc
        self._report = report
        self._policy = policy
        self._term_wait = runner.kill_margin(job.ttr) / 2
        assert proc.stdin is not None and proc.stderr is not None
        self._stderr = _Stderr(proc.stderr)
        if job.body:
            threading.Thread(target=_feed, args=(proc.stdin, job.body), name="sqlq-stdin",
                             daemon=True).start()
        else:
            _feed(proc.stdin, b"")

    def wait(self, timeout: float) -> runner.Outcome | None:
        try:
            code = self._proc.wait(timeout)
        except subprocess.TimeoutExpired:
            return None
        self._ended()
        self._stderr.join()
        if code == 0:
            return runner.done(None)
        reason = status = describe_status(code)
        if self._stderr.last_line:
            reason += f": {self._stderr.last_line}"
        return runner.failed(reason, self._policy, error=status, traceback=self._stderr.tail)

    def kill(self, reason: str) -> runner.Outcome | None:
        """SIGTERM to the process group, SIGKILL if it is still there a moment later."""
        self._signal(signal.SIGTERM)
        try:
            self._proc.wait(self._term_wait)
        except subprocess.TimeoutExpired:
            self._signal(signal.SIGKILL)
            self._proc.wait()
        self._signal(signal.SIGKILL)  # whatever the command left behind in its group
        self._ended()
        self._stderr.join()
        return runner.failed(reason, self._policy, error=TIMED_OUT, traceback=self._stderr.tail)

    def _ended(self) -> None:
        if self._report is not None:
            self._report.running(0)

    def _signal(self, sig: signal.Signals) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self._proc.pid, sig)


class ShellRunner:
    """Runs each job as ``command`` in a child process.

    Args:
        command: the program and its arguments (no shell involved: use ``sh -c`` for one).
        policy: retries and backoff for failed runs (``--retries``, ``--backoff``).
        keepalive: touch jobs while they run instead of killing them at the TTR.
        db_path: exported as ``SQLQ_DB`` so the command's own ``sqlq`` calls find the file.
        report: where to say which command group runs (a supervisor's pipe), if anywhere.

    A command started from the main thread (as ``sqlq work`` starts them) dies with the
    worker process (Linux). The kernel ties that to the thread that forked, so a command
    started from another thread, which may end before the worker, is not tied.
    """

    def __init__(self, command: Sequence[str], policy: RetryPolicy, *, keepalive: bool = False,
                 db_path: str | None = None, report: GroupReport | None = None) -> None:
        if not command:
            raise ValueError("command must name a program")
        self.command = list(command)
        self.policy = policy
        self.keepalive = keepalive
        self.name = os.path.basename(self.command[0])
        self.report = report
        self._env = dict(os.environ)
        self._env.pop(REPORT_FD_ENV, None)  # the command gets no copy of the pipe
        if db_path is not None:
            self._env["SQLQ_DB"] = db_path

    def start(self, job: Job) -> _ShellRun | runner.Finished:
        given_up = runner.exhausted(job, self.policy)
        if given_up is not None:
            return runner.Finished(given_up, name=self.name)
        env = dict(self._env, SQLQ_JOB_ID=str(job.id), SQLQ_TUBE=job.tube,
                   SQLQ_ATTEMPT=str(job.reserves), SQLQ_LEASE=str(job.lease))
        if tracing.INSTALLED and tracing.active():
            env.update(tracing.environment())  # TRACEPARENT: the command joins the run's trace
        parent = os.getpid()
        tie = None
        if _PRCTL is not None and threading.current_thread() is threading.main_thread():
            tie = lambda: _die_with(parent, self.report)  # noqa: E731
        try:
            proc = subprocess.Popen(self.command, stdin=subprocess.PIPE, stderr=subprocess.PIPE,
                                    env=env, start_new_session=True, close_fds=True,
                                    preexec_fn=tie)
        except OSError as exc:
            # Maybe a deploy in progress: a failure like any other, retried then buried.
            if self.report is not None and tie is not None:
                self.report.running(0)  # the child said its group, then failed to exec
            reason = f"cannot run {self.command[0]}: {exc.strerror or exc}"
            return runner.Finished(runner.failed(reason, self.policy, error=type(exc).__name__),
                                   name=self.name)
        if self.report is not None and tie is None:  # else the child said so itself
            self.report.running(proc.pid)  # its own session: its pid is its group
        return _ShellRun(proc, job, self.name, self.policy, self.keepalive, self.report)

    def close(self) -> None:
        """Nothing held between jobs."""
