"""The progress bar of ``sqlq copy``, ``backup``, ``put-many`` and ``maintain`` as a person
sees it: each command run with its stderr on a pseudo-terminal draws a bar and ends it
with a final line, and its stdout is what it prints without one; with stderr piped, or
``--quiet``, nothing is drawn. How the bar is drawn: tests/unit/test_progress.py."""

from __future__ import annotations

import os
import pty
import subprocess
import sys
import threading
from pathlib import Path

import pytest

import sqlq
from tests import forkserver
from tests.timing import PATIENCE

SQLQ = [sys.executable, "-m", "sqlq"]
JOBS = 3000


def on_terminal(args: list[str], stdin: bytes | None = None) -> tuple[str, str, int]:
    """Run sqlq with stderr on a pseudo-terminal: (stdout, what the terminal got, exit)."""
    master, slave = pty.openpty()
    screen = bytearray()

    def read() -> None:
        while True:
            try:
                chunk = os.read(master, 65536)
            except OSError:  # EIO: the child's end is closed
                return
            if not chunk:
                return
            screen.extend(chunk)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        child = forkserver.Popen([*SQLQ, *args], stdin=subprocess.PIPE,
                                 stdout=subprocess.PIPE, stderr=slave,
                                 env={**os.environ, "TERM": "xterm", "COLUMNS": "100"})
        os.close(slave)
        out, _ = child.communicate(stdin or b"", timeout=PATIENCE)
        reader.join(PATIENCE)
    finally:
        os.close(master)
    return out.decode(), screen.decode("utf-8", "replace"), child.returncode


def piped(args: list[str], stdin: bytes | None = None) -> tuple[str, str, int]:
    done = forkserver.run([*SQLQ, *args], input=stdin or b"", capture_output=True,
                          timeout=PATIENCE, env={**os.environ, "TERM": "xterm"})
    return done.stdout.decode(), done.stderr.decode(), done.returncode


def final_line(screen: str) -> str:
    """The last line the terminal shows once the command is done."""
    assert screen.endswith("\x1b[K\r\n"), repr(screen[-200:])  # ended, with a newline
    return screen.removesuffix("\x1b[K\r\n").split("\r")[-1]


@pytest.fixture
def source(tmp_path: Path) -> Path:
    path = tmp_path / "source.db"
    with sqlq.Queue(str(path)) as q:
        q.put_many([b"job %d" % i for i in range(JOBS)], tube="t")
    return path


@pytest.fixture
def lines(tmp_path: Path) -> Path:
    path = tmp_path / "bodies.txt"
    path.write_bytes(b"".join(b"body %d\n" % i for i in range(JOBS)))
    return path


def commands(source: Path, target: str, lines: Path, tmp_path: Path
             ) -> list[tuple[str, list[str], bytes | None]]:
    """(the final line's first word, the command, its stdin) of each long command."""
    return [
        ("copied", ["copy", str(source), target], None),
        ("backed up", ["--db", target, "backup", str(tmp_path / "backup.db")], None),
        ("backed up", ["--db", str(source), "backup", str(tmp_path / "file-backup.db")], None),
        ("put", ["--db", target, "put-many", str(lines), "--tube", "more"], None),
        ("put", ["--db", target, "put-many", "--tube", "piped"], lines.read_bytes()),
        ("maintained", ["--db", target, "maintain"], None),
    ]


@pytest.mark.slow
def test_each_long_command_draws_a_bar_on_a_terminal_and_ends_it(
        tmp_path: Path, db_url: str, source: Path, lines: Path) -> None:
    for done, args, stdin in commands(source, db_url, lines, tmp_path):
        out, screen, code = on_terminal(args, stdin)
        assert code == 0, (args, out, screen)
        assert "\r" not in out and "\x1b" not in out  # the bar never reaches stdout
        last = final_line(screen)
        assert last.startswith(done + " "), (args, last)
        if "backup" in args and "://" not in args[1] or "maintain" in args:
            assert "100%" in last, last  # a file's bytes, maintain's steps
        elif "copy" in args or "backup" in args:
            assert "100%" in last and f"{JOBS:,} jobs" in last and "jobs/s" in last, last
        else:  # put-many: a file's size is known, a pipe's once it is read (spooled)
            assert "100%" in last and f"{JOBS:,} jobs" in last, last
        if "put-many" in args:
            ids = out.split()
            assert len(ids) == JOBS and int(ids[-1]) - int(ids[0]) == JOBS - 1
    with sqlq.Queue(db_url) as q:
        assert q.stats()["current-jobs-ready"] == 3 * JOBS


@pytest.mark.slow
@pytest.mark.sqlite_only
def test_no_bar_when_stderr_is_piped_or_with_quiet(tmp_path: Path, db_url: str, source: Path,
                                                   lines: Path) -> None:
    (tmp_path / "piped").mkdir()
    for _, args, stdin in commands(source, db_url, lines, tmp_path / "piped"):
        out, err, code = piped(args, stdin)
        assert code == 0 and err == "", (args, err)
    Path(db_url).unlink()
    for suffix in ("-wal", "-shm"):
        Path(db_url + suffix).unlink(missing_ok=True)
    (tmp_path / "quiet").mkdir()
    for _, args, stdin in commands(source, db_url, lines, tmp_path / "quiet"):
        out, screen, code = on_terminal([*args, "--quiet"], stdin)
        assert code == 0 and screen == "", (args, screen)
    out, screen, code = on_terminal(["copy", str(source), db_url])
    shown = screen.split("\r\x1b[K")[-1]  # the line the terminal shows once erased
    assert code == 1 and shown.startswith("sqlq: ") and "already holds" in shown, screen
    assert "copying" not in shown  # a refusal: its error alone, no bar left above it


@pytest.mark.slow
@pytest.mark.sqlite_only
def test_put_many_from_a_slow_pipe_holds_no_transaction_while_it_reads(db_url: str) -> None:
    """A pipe is read whole before the first put: while its writer is slow, other writers
    of the file go on (a put-many that put each chunk as it came would hold the file's
    write lock until the pipe closed)."""
    child = forkserver.Popen([*SQLQ, "--db", db_url, "put-many", "--tube", "piped"],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE)
    assert child.stdin is not None
    child.stdin.write(b"".join(b"line %d\n" % i for i in range(300_000)))  # 3 MB: chunks
    child.stdin.flush()
    with sqlq.Queue(db_url) as q:
        q.backend.set_lock_wait(0.5)
        for _ in range(5):  # the child reads on meanwhile
            q.delete(q.put(b"another writer"))
        out, err = child.communicate(timeout=PATIENCE)  # closes the pipe: now it puts
        assert child.returncode == 0, err
        assert len(out.split()) == 300_000
        assert q.stats_tube("piped")["current-jobs-ready"] == 300_000
