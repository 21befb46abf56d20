"""``sqlq work``: what the command was told, and the process it becomes.

:func:`run` configures logging, imports the task modules (so a bad one fails at
once, with one line), works out the database file and the tubes, then becomes the
supervisor of ``--processes`` workers (default 1; a crashed one is restarted),
each started with :meth:`WorkConfig.child_args` (``config.py``), which runs
:func:`run_worker`. A supervisor that forks its workers (``WorkConfig.fork``) imports
the task modules in a child of its own (:func:`resolve_apart`): a module that opens a
Queue or starts a thread as it is imported must not be in the process the workers are
forked from.
"""

from __future__ import annotations

import inspect
import json
import logging
import os
import shutil
import time
import traceback
from collections.abc import Sequence
from typing import TYPE_CHECKING

from ..backends import exists, identity
from ..backends.base import Durability
from ..errors import Disconnected, Error
from ..horizon import Thresholds, check_every
from ..queue import Queue
from ..tasks.retry import RetryPolicy
from . import logs, runner
from .config import WorkConfig
from .worker import Worker

if TYPE_CHECKING:
    from .aworker import AsyncWorker

log = logging.getLogger("sqlq.worker")
#: How often a worker started during an outage tries its database server again.
RECONNECT_S = 0.5

def resolve(config: WorkConfig) -> tuple[str, list[str]]:
    """The database path and tubes to use, after the task modules are imported.

    Without ``--db``/``$SQLQ_DB``, a worker of task modules uses the file their Queue
    opened, so ``sqlq work --import app`` needs no path repeated. Without ``--tube`` it
    watches every tube its tasks use.
    """
    from ..tasks.task import REGISTRY

    queues = {identity(t.queue.path): t.queue.path for t in REGISTRY.values()}
    if config.db is not None:
        db = config.db
    elif config.imports and len(queues) == 1:
        db = next(iter(queues.values()))
    elif config.imports and len(queues) > 1:
        raise Error(f"the imported tasks use {len(queues)} database files; choose one with --db")
    else:
        db = os.environ.get("SQLQ_DB") or "sqlq.db"
    if config.tubes:
        tubes = list(config.tubes)
    elif config.imports:
        tubes = sorted({t.tube for t in REGISTRY.values()})
        if not tubes:
            raise Error(f"no tasks found in {', '.join(config.imports)}: declare them with "
                        "@q.task, or say which tubes to watch with --tube")
    else:
        tubes = ["default"]
    return db, tubes


def prepare(config: WorkConfig) -> tuple[str, list[str]]:
    """Configure logging, check the options and import the task modules; return the
    database and tubes."""
    check(config)
    import_tasks(config)
    return resolve(config)


def check(config: WorkConfig) -> None:
    """Configure logging and check the options (no task module imported)."""
    logs.configure(config.log_level, config.log_format)
    if config.imports and config.command:
        raise Error("give task modules (--import) or a command (-- COMMAND), not both")
    if not config.imports and not config.command:
        raise Error("nothing to run: give --import MODULE or -- COMMAND ARGS...")
    if config.command and config.concurrency > 1:
        raise Error("--concurrency applies to tasks (--import); run a COMMAND in parallel "
                    "with --processes")
    if config.command:
        check_command(config.command[0])
    Thresholds.from_env()  # a bad $SQLQ_WARN_... stops here, not in every restarted child
    check_every()


def import_tasks(config: WorkConfig) -> None:
    """Import the task modules (``--import``), each failure said in one line."""
    if config.imports:
        from ..tasks.task import import_modules

        for module in config.imports:
            try:
                import_modules([module])
            except Exception as exc:
                raise Error(import_failure(module, exc)) from exc


def resolve_apart(config: WorkConfig) -> str:
    """The database :func:`resolve` gives, with the task modules imported in a forked
    child (a supervisor's: see the module docstring); a module that fails to import, or
    tasks that do not say which database, raise its one-line Error here."""
    if not config.imports:
        return resolve(config)[0]
    from ..core.forking import flush_output, fork

    read, write = os.pipe()
    pid = fork()
    if pid == 0:  # the child: import, resolve, say what came of it, and leave (whatever
        try:      # a module does: a sys.exit at import must not return into the supervisor)
            os.close(read)
            try:
                import_tasks(config)
                said = {"db": resolve(config)[0]}
            except BaseException as exc:  # noqa: BLE001 - said to the supervisor, which raises it
                if os.environ.get("SQLQ_DEBUG"):
                    traceback.print_exc()
                said = {"error": str(exc) if isinstance(exc, Error) else
                        f"{type(exc).__name__}: {exc}"}
            os.write(write, json.dumps(said).encode())
        finally:
            flush_output()
            os._exit(0)
    os.close(write)
    with os.fdopen(read, "rb") as pipe:
        data = pipe.read()
    _, status = os.waitpid(pid, 0)
    said = json.loads(data) if data else {
        "error": f"the task modules ({', '.join(config.imports)}) ended their import with "
                 f"status {os.waitstatus_to_exitcode(status)}"}
    if "error" in said:
        raise Error(said["error"])
    return str(said["db"])


def check_command(program: str) -> None:
    """Refuse a COMMAND that cannot run, before any job is reserved.

    A worker started with a typo would otherwise spend every job's retries and bury
    it. Checked once, at start: a command that disappears later (a deploy) is a job's
    failure like any other, retried then buried (``shell.py``).
    """
    if shutil.which(program) is not None:
        return
    if os.sep not in program:
        raise Error(f"cannot run {program}: command not found on PATH")
    if os.path.isdir(program):
        raise Error(f"cannot run {program}: it is a directory")
    if not os.path.exists(program):
        raise Error(f"cannot run {program}: no such file (in {os.getcwd()})")
    raise Error(f"cannot run {program}: it is not executable (chmod +x {program})")


def import_failure(module: str, exc: BaseException) -> str:
    """One line on a task module that failed to import: the error, and where it was raised.

    ``SQLQ_DEBUG=1`` prints the whole traceback (``cli/exits.py``).
    """
    what = f"{type(exc).__name__}: {exc}"
    if isinstance(exc, ModuleNotFoundError) and exc.name is not None \
            and (module == exc.name or module.startswith(exc.name + ".")):
        return (f"cannot import {module}: {what} (looked in {os.getcwd()} and the Python "
                "path: run from the directory that holds it, or set PYTHONPATH)")
    if isinstance(exc, SyntaxError) and exc.filename:
        where = f"{exc.filename}, line {exc.lineno}"
        what = f"{type(exc).__name__}: {exc.msg}"
    else:
        frames = [f for f in traceback.extract_tb(exc.__traceback__)
                  if not f.filename.startswith("<frozen ")]
        where = f"{frames[-1].filename}, line {frames[-1].lineno}" if frames else ""
    at = f"at {where}; " if where else ""
    return f"cannot import {module}: {what} ({at}SQLQ_DEBUG=1 shows the traceback)"


def run(config: WorkConfig) -> int:
    """``sqlq work``: a supervisor of ``--processes`` workers, or (``--in-process``) one."""
    if config.in_process or not config.fork:
        db, tubes = prepare(config)
    else:  # the workers are forked from this process: no task module in it
        check(config)
        db = resolve_apart(config)
    if not config.init and not exists(db):
        # A worker on a new, empty file would wait for ever: most likely a typo.
        raise Error(f"no database at {db} (use --db PATH or $SQLQ_DB; --init starts a worker "
                    "on a new, empty one)")
    if not config.in_process:
        from .supervisor import Supervisor

        return Supervisor(config, db).run()
    return run_worker(config, db, tubes)


def open_queue(db: str, durability: Durability, *, init: bool = False) -> Queue:
    """The worker's Queue, once its database server can be reached: a worker started
    during an outage waits for the server (every RECONNECT_S) rather than exit and
    be restarted by its supervisor with a growing back-off, which would delay the
    first jobs by up to that back-off once the server is back."""
    queue = Queue(db, durability=durability, init=init)  # needs no server yet
    waiting_since = None
    while True:
        try:
            queue.backend.connect()
        except Disconnected as e:
            if waiting_since is None:
                waiting_since = time.monotonic()
                log.warning("%s; waiting for the database server", e)
            time.sleep(RECONNECT_S)
            continue
        except BaseException:
            queue.close()
            raise
        if waiting_since is not None:
            log.warning("the database server answered after %.1f s",
                        time.monotonic() - waiting_since)
        return queue


def run_worker(config: WorkConfig, db: str, tubes: Sequence[str]) -> int:
    """Run one worker in this process until it is stopped; the exit status (0)."""
    from ..tasks.task import REGISTRY
    from .scheduler import start_scheduler
    from .shell import GroupReport, ShellRunner
    from .taskrun import TaskRunner

    queue = open_queue(db, "normal" if config.durability == "normal" else "full",
                       init=config.init)
    job_runner: runner.Runner
    if config.command:
        policy = RetryPolicy(config.retries, config.backoff)
        job_runner = ShellRunner(config.command, policy, keepalive=config.keepalive,
                                 db_path=queue.backend.child_location(),
                                 report=GroupReport.from_environ())
    else:
        job_runner = TaskRunner()
    worker: Worker | AsyncWorker
    if isinstance(job_runner, TaskRunner) and (config.concurrency > 1 or any(
            inspect.iscoroutinefunction(t.fn) for t in REGISTRY.values())):
        from .aworker import AsyncWorker

        worker = AsyncWorker(queue, job_runner, tubes, concurrency=config.concurrency,
                             burst=config.burst, grace=config.grace,
                             prefetch=config.prefetch)
    else:
        worker = Worker(queue, job_runner, tubes, burst=config.burst, grace=config.grace,
                        prefetch=config.prefetch)
    worker.install_signal_handlers()  # before the "watching" line: a SIGTERM now stops it
    scheduler = None if config.burst else start_scheduler(queue, REGISTRY.values())
    log.info("worker %d watching %s on %s%s", os.getpid(), ", ".join(worker.tubes),
             queue.backend.location,
             f" ({config.concurrency} at once, asyncio)" if not isinstance(worker, Worker)
             else "", extra={"pid": os.getpid()})
    try:
        worker.run()
    finally:
        if scheduler is not None:
            scheduler.stop()
        worker.close()
        job_runner.close()
    log.info("worker %d stopped after %d job%s", os.getpid(), worker.processed,
             "" if worker.processed == 1 else "s", extra={"pid": os.getpid()})
    queue.close()
    if worker.abandoned:
        # A task thread is still running and cannot be stopped; its job is back in the
        # queue. Leave without waiting for it (and without running its atexit code).
        logging.shutdown()
        os._exit(0)
    return 0
