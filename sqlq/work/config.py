"""``WorkConfig``: what ``sqlq work`` was told, and the arguments of each child.

Its own module so that ``supervisor.py`` (which starts the children) and ``command.py``
(which becomes the supervisor) both import it, and not each other.
"""

from __future__ import annotations

from dataclasses import dataclass

from .worker import DEFAULT_GRACE


@dataclass
class WorkConfig:
    """Everything ``sqlq work`` was told; a supervisor passes it on to its children."""

    db: str | None = None
    imports: tuple[str, ...] = ()
    tubes: tuple[str, ...] = ()
    command: tuple[str, ...] = ()
    processes: int = 1
    concurrency: int = 1
    prefetch: int | None = None  # jobs per claim; None adapts (prefetch.py)
    burst: bool = False
    retries: int = 3
    backoff: float = 1.0
    grace: float = DEFAULT_GRACE
    keepalive: bool = False
    log_level: str = "INFO"
    log_format: str = "text"
    durability: str = "full"
    init: bool = False  # create a missing file, or add sqlq's tables to another app's database
    in_process: bool = False  # be the worker, not a supervisor (a supervisor's children)
    #: The supervisor forks its workers (supervisor.py); set by the ``sqlq`` command
    #: only, whose process holds nothing else: run from another program, it starts
    #: each as a new interpreter.
    fork: bool = False

    def child_args(self, db: str) -> list[str]:
        """The ``sqlq`` arguments of one worker process with this configuration."""
        argv = ["--db", db, "work", "--in-process",
                "--retries", str(self.retries), "--backoff", repr(self.backoff),
                "--grace", repr(self.grace), "--concurrency", str(self.concurrency),
                "--prefetch", "auto" if self.prefetch is None else str(self.prefetch),
                "--log-level", self.log_level,
                "--log-format", self.log_format, "--durability", self.durability]
        for module in self.imports:
            argv += ["--import", module]
        for tube in self.tubes:
            argv += ["--tube", tube]
        if self.burst:
            argv.append("--burst")
        if self.keepalive:
            argv.append("--keepalive")
        if self.init:
            argv.append("--init")
        if self.command:
            argv += ["--", *self.command]
        return argv
