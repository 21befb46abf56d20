"""Helpers for tests that run real ``sqlq work`` processes (not a test module itself)."""

from __future__ import annotations

import atexit
import collections
import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from sqlq import Job, Queue
from tests import forkserver, orphans
from tests.conftest import spawn
from tests.timing import PATIENCE

ROOT = Path(__file__).resolve().parent.parent


def wait_for(predicate: Callable[[], Any], timeout: float = PATIENCE, what: str = "") -> Any:
    """Poll ``predicate`` until it returns something true; fail the test after ``timeout``."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what or predicate}")
        time.sleep(0.02)


def killed_holder_gives_back(w: Work, q: Queue, tube: str, ids: list[int],
                             within: float = 20) -> None:
    """SIGKILL the worker ``w``, which holds the jobs ``ids`` (with a TTR over ``within``):
    all of them are ready again within ``within`` seconds (its owner's death, not their
    TTR), each having counted one reservation more, started or not; then deleted."""
    os.kill(w.pid, signal.SIGKILL)
    w.wait()
    started = time.monotonic()
    back: list[Job] = q.reserve_many(len(ids), tube, timeout=within)
    while len(back) < len(ids) and time.monotonic() - started < within:
        back += q.reserve_many(len(ids) - len(back), tube, timeout=1)
    assert sorted(j.id for j in back) == sorted(ids)
    assert time.monotonic() - started < within, "the jobs came back at their TTR"
    assert all(j.reserves == 2 for j in back)
    q.delete_many(back)


def lines(path: Path) -> list[str]:
    """A file's lines, or none if it does not exist yet."""
    try:
        return path.read_text().splitlines()
    except FileNotFoundError:
        return []


def children(pid: int) -> list[int]:
    """The live child processes of ``pid`` (from /proc)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        if int(fields[1]) == pid and fields[0] != "Z":
            found.append(int(entry))
    return found


def alive(pid: int) -> bool:
    """True while ``pid`` exists and is not a zombie."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def private_db() -> str:
    """A database file of this process's own (removed at exit), for the task modules
    the tests import: runs in other worktrees or at other versions must not share one."""
    directory = tempfile.mkdtemp(prefix="sqlq-jobs-")
    atexit.register(shutil.rmtree, directory, True)
    return os.path.join(directory, "q.db")


class Work:
    """``python -m sqlq --db DB work ARGS...`` as a child process, logging to a file; it
    dies with the test's process (tests/orphans.py)."""

    def __init__(self, db: str | Path, *args: str, log: Path | None = None,
                 env: dict[str, str] | None = None, cwd: Path = ROOT) -> None:
        self.db = str(db)
        logs = Path(private_db()).parent if "://" in self.db else Path(self.db).parent
        self.log_path = log or logs / f"sqlq-work-{os.getpid()}-{time.monotonic_ns()}.log"
        full_env = dict(os.environ, SQLQ_DB=self.db, PYTHONPATH=str(ROOT), **(env or {}))
        self._log = open(self.log_path, "wb")  # noqa: SIM115 - closed in wait()
        self.proc = forkserver.Popen(
            orphans.command("-m", "sqlq", "--db", self.db, "work", *args),
            stdout=self._log, stderr=subprocess.STDOUT, env=full_env, cwd=cwd)

    @property
    def pid(self) -> int:
        return self.proc.pid

    def text(self) -> str:
        """Everything it logged so far."""
        return self.log_path.read_text(errors="replace")

    def records(self) -> list[dict[str, Any]]:
        """Its log lines parsed as JSON (for ``--log-format json``)."""
        out = []
        for line in self.text().splitlines():
            if line.startswith("{"):
                out.append(json.loads(line))
        return out

    def wait_log(self, needle: str, timeout: float = PATIENCE, count: int = 1) -> None:
        """Wait until ``needle`` appears ``count`` times in the log."""
        wait_for(lambda: self.text().count(needle) >= count, timeout,
                 f"{needle!r} x{count} in the log:\n{self.text()}")

    def signal(self, sig: int = signal.SIGTERM) -> None:
        self.proc.send_signal(sig)

    def wait(self, timeout: float = PATIENCE) -> int:
        """Wait for it to exit; its exit status."""
        try:
            return self.proc.wait(timeout)
        finally:
            self._log.close()

    def stop(self, timeout: float = PATIENCE) -> int:
        """SIGTERM, then wait; its exit status."""
        if self.proc.poll() is None:
            self.signal(signal.SIGTERM)
        return self.wait(timeout)

    def __enter__(self) -> Work:
        return self

    def __exit__(self, *exc: object) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self._log.close()


def drain_exactly_once(db_url: str, drainer: str, jobs: int) -> list[int]:
    """Put ``jobs`` jobs, drain them with 4 processes running ``drainer`` (it prints the
    ids it claimed), check each was claimed exactly once; each process's share."""
    with Queue(db_url, durability="normal") as q:
        ids = q.put_many([b"job %d" % i for i in range(jobs)])
    workers = [spawn(drainer, db_url, "normal") for _ in range(4)]
    outputs = [w.communicate(timeout=120) for w in workers]
    for w, (_, err) in zip(workers, outputs, strict=True):
        assert w.returncode == 0, err
        assert err == ""
    claimed = [int(x) for out, _ in outputs for x in out.split()]
    counts = collections.Counter(claimed)
    assert sorted(counts) == ids
    assert max(counts.values()) == 1
    return sorted(len(out.split()) for out, _ in outputs)


#: A process that holds a SQLite file's write lock (argv[1]) for argv[2] seconds;
#: it prints "locked" once it has it.
SQLITE_WRITE_LOCK_HOLDER = """
import sqlite3, sys, time
conn = sqlite3.connect(sys.argv[1], isolation_level=None)
conn.execute("BEGIN IMMEDIATE")
print("locked", flush=True)
time.sleep(float(sys.argv[2]))
conn.execute("COMMIT")
"""
