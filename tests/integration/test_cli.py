"""The ``sqlq`` command line: every command, every exit code, exact bytes, JSON, durations.

Most tests use click's CliRunner (fast, in-process, same error mapping as the console
script because it lives in ``SqlqGroup.main``); the ``Subprocess`` tests run the real
``sqlq`` script and ``python -m sqlq`` for what only a process shows: argv bytes,
signals, broken pipes, resource limits.
"""

from __future__ import annotations

import base64
import importlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result
from hypothesis import given
from hypothesis import strategies as st

import sqlq
from sqlq.cli import cli
from sqlq.core.display import display_text
from sqlq.core.durations import MAX_SECONDS, format_duration, parse_duration
from tests import forkserver
from tests.conftest import ROOT
from tests.workers import wait_for

BINARY = bytes(range(256)) + b"\r\n\x1b[2J\x00end"
BIN_DIR = Path(sys.executable).parent


@pytest.fixture
def db(db_url: str) -> Path:
    """The database of the test: a file, or a PostgreSQL URL (typed Path for the
    file-only tests, which are marked sqlite_only)."""
    return Path(db_url) if "://" not in db_url else db_url  # type: ignore[return-value]


@pytest.fixture
def absent(db_path: str) -> Path:
    """A file that does not exist yet (the tests that it is never created)."""
    return Path(db_path)


def run(db: Path, *args: str, input: bytes | str | None = None, code: int = 0) -> Result:
    """Invoke ``sqlq --db DB ARGS`` in-process and check the exit code."""
    result = CliRunner().invoke(cli, ["--db", str(db), *args], input=input)
    assert result.exit_code == code, (result.exit_code, result.output, result.exception)
    if code:
        assert_one_line_error(result.stderr)
    return result


def assert_one_line_error(stderr: str) -> None:
    assert "Traceback" not in stderr, stderr
    assert len(stderr.strip().splitlines()) == 1, stderr
    assert stderr.startswith("sqlq"), stderr


def put(db: Path, body: str = "hello", *args: str) -> int:
    return int(run(db, "put", body, *args).stdout)


def job(db: Path, jid: int) -> dict[str, Any]:
    return json.loads(run(db, "peek", str(jid), "--json").stdout)


# --- put / put-many -------------------------------------------------------------------------


def test_put_prints_the_id_and_peek_shows_the_job(db: Path) -> None:
    assert put(db, "hello") == 1
    assert put(db, "world", "--tube", "emails", "--priority", "5", "--ttr", "2m") == 2
    record = job(db, 2)
    assert record["tube"] == "emails" and record["priority"] == 5 and record["ttr"] == 120
    assert record["body"] == "world" and record["state"] == "ready"
    text = run(db, "peek", "2").stdout
    assert re.search(r"^tube:\s+emails$", text, re.M) and text.rstrip().endswith("world")


def test_put_json(db: Path) -> None:
    assert json.loads(run(db, "put", "x", "--json").stdout) == {"id": 1}


def test_put_binary_body_from_stdin_is_exact(db: Path) -> None:
    jid = int(run(db, "put", "-", input=BINARY).stdout)
    assert run(db, "peek", str(jid), "--raw").stdout_bytes == BINARY
    record = job(db, jid)
    assert record["body_encoding"] == "base64" and record["body_size"] == len(BINARY)
    assert base64.b64decode(record["body"]) == BINARY
    assert run(db, "reserve", "--timeout", "0", "--raw").stdout_bytes == BINARY


def test_put_without_body_reads_a_pipe(db: Path) -> None:
    jid = int(run(db, "put", input=b"piped\n").stdout)
    assert job(db, jid)["body"] == "piped\n"


def test_put_empty_body(db: Path) -> None:
    jid = int(run(db, "put", "-", input=b"").stdout)
    assert job(db, jid)["body"] == "" and run(db, "peek", str(jid), "--raw").stdout_bytes == b""


def test_put_delay_and_unique_key(db: Path) -> None:
    a = put(db, "a", "--delay", "5m", "--unique-key", "k")
    assert job(db, a)["state"] == "delayed"
    assert put(db, "again", "--unique-key", "k") == a


def test_put_replace_debounces_the_keys_job(db: Path) -> None:
    a = put(db, "a", "--delay", "5m", "--unique-key", "k")
    assert put(db, "b", "--unique-key", "k", "--replace", "--priority", "3") == a
    record = job(db, a)
    assert (record["body"], record["priority"], record["state"]) == ("b", 3, "ready")
    run(db, "subscribe", "orders", "t")
    first = run(db, "publish", "orders", "x", "--unique-key", "k", "--replace").stdout
    again = run(db, "publish", "orders", "y", "--unique-key", "k", "--replace").stdout
    assert first == again and job(db, int(first))["body"] == "y"


def test_put_too_big_is_an_error(db: Path) -> None:
    result = run(db, "put", "-", input=b"x" * ((1 << 20) + 1), code=1)
    assert "maximum" in result.stderr


def test_put_many_lines_and_nul(db: Path) -> None:
    ids = run(db, "put-many", "--tube", "n", input=b"1\n2\n\n3\n").stdout.split()
    assert ids == ["1", "2", "3"]
    lines = run(db, "put-many", "-0", "--json", input=b"a\nb\0c\0").stdout.splitlines()
    assert [json.loads(line) for line in lines] == [{"id": 4}, {"id": 5}]
    assert job(db, 4)["body"] == "a\nb"
    assert run(db, "put-many", input=b"").stdout == ""


def test_put_many_from_file(db: Path, tmp_path: Path) -> None:
    (tmp_path / "bodies").write_bytes(b"x\ny\n")
    assert run(db, "put-many", str(tmp_path / "bodies")).stdout.split() == ["1", "2"]
    assert "missing" in run(db, "put-many", str(tmp_path / "missing"), code=2).stderr


# --- reserve ---------------------------------------------------------------------------------


def test_reserve_shows_the_most_urgent_job(db: Path) -> None:
    put(db, "low", "--priority", "9")
    put(db, "high", "--priority", "1", "--tube", "other")
    result = run(db, "reserve", "--tube", "default", "--tube", "other", "--timeout", "0")
    assert re.search(r"^id:\s+2$", result.stdout, re.M)
    assert re.search(r"^tube:\s+other$", result.stdout, re.M)
    assert result.stdout.rstrip().endswith("high")
    record = json.loads(run(db, "reserve", "-t", "default", "-t", "other", "--json").stdout)
    assert record["id"] == 1 and record["body"] == "low" and record["state"] == "reserved"


def test_reserve_timeout_exits_4(db: Path) -> None:
    put(db, "later", "--delay", "1h")
    result = run(db, "reserve", "--timeout", "0", code=4)
    assert "no job ready" in result.stderr
    started = time.monotonic()
    run(db, "reserve", "--timeout", "300ms", code=4)
    assert 0.25 < time.monotonic() - started < 10


def test_reserve_id_only_and_job_stays_reserved_after_exit(db: Path) -> None:
    put(db, "work")
    jid = run(db, "reserve", "--id-only", "--timeout", "0").stdout.strip()
    assert jid == "1"
    # The CLI process has let go of the queue, but the reservation lasts its TTR.
    run(db, "reserve", "--timeout", "0", code=4)
    assert job(db, 1)["state"] == "reserved"


def test_reserve_escapes_a_binary_body_for_the_terminal(db: Path) -> None:
    run(db, "put", "-", input=b"ok\x1b[2Jbad\xff")
    out = run(db, "reserve", "--timeout", "0").stdout
    assert "\x1b" not in out and "\\x1b[2Jbad\\xff" in out and "binary" in out


# --- delete, release, bury, kick, kick-job, touch -----------------------------------------


def test_delete(db: Path) -> None:
    put(db)
    assert run(db, "delete", "1").stdout.strip() == "deleted job 1"
    result = run(db, "delete", "1", code=3)
    assert "1" in result.stderr
    run(db, "peek", "1", code=3)


def test_release_bury_kick_touch(db: Path) -> None:
    put(db, "job")
    run(db, "release", "1", code=3)  # not reserved
    run(db, "reserve", "--timeout", "0")
    assert json.loads(run(db, "release", "1", "--delay", "1h", "--json").stdout)["id"] == 1
    assert job(db, 1)["state"] == "delayed"
    run(db, "kick-job", "1")
    assert job(db, 1)["state"] == "ready"
    run(db, "reserve", "--timeout", "0")
    run(db, "touch", "1")
    run(db, "bury", "1", "--reason", "bad input", "--priority", "7")
    record = job(db, 1)
    assert record["state"] == "buried" and record["bury_reason"] == "bad input"
    assert record["priority"] == 7
    assert re.search(r"^reason:\s+bad input$", run(db, "peek", "1").stdout, re.M)
    run(db, "touch", "1", code=3)
    assert run(db, "kick", "10").stdout.strip() == "kicked 1 job"
    assert json.loads(run(db, "kick", "10", "--json").stdout) == {"kicked": 0}
    run(db, "kick-job", "99", code=3)


def test_postpone(db: Path) -> None:
    put(db, "job")
    assert run(db, "postpone", "1", "1h").stdout.strip() == "postponed job 1 (delayed 1h00m)"
    assert job(db, 1)["state"] == "delayed"
    assert json.loads(run(db, "postpone", "1", "0", "--json").stdout) == {
        "id": 1, "postponed": True}
    assert job(db, 1)["state"] == "ready"
    run(db, "reserve", "--timeout", "0")
    run(db, "postpone", "1", "1h", code=3)  # reserved
    run(db, "postpone", "99", "1h", code=3)
    run(db, "postpone", "1", "soon", code=2)  # not a duration: usage


# --- peek, stats, tubes, pause ------------------------------------------------------------


def test_peek_by_state(db: Path) -> None:
    put(db, "r", "--tube", "t")
    put(db, "d", "--tube", "t", "--delay", "1h")
    assert run(db, "peek", "--ready", "--tube", "t", "--raw").stdout == "r"
    assert run(db, "peek", "--delayed", "-t", "t", "--raw").stdout == "d"
    assert "no buried job in tube t" in run(db, "peek", "--buried", "-t", "t", code=3).stderr
    run(db, "peek", code=2)
    run(db, "peek", "1", "--ready", code=2)
    assert "999" in run(db, "peek", "999", code=3).stderr


def test_peek_by_state_without_a_tube_looks_in_every_tube(db: Path) -> None:
    """newcomer.md #6: the job buried in tube thumbs was not found by a bare
    ``sqlq peek --buried``, which looked in tube default only."""
    held = put(db, "held", "--tube", "c")
    run(db, "reserve", "--tube", "c")  # neither ready, delayed nor buried
    for kind in ("--ready", "--delayed", "--buried"):
        assert "no " + kind[2:] + " job in any tube" in run(db, "peek", kind, code=3).stderr
    put(db, "later", "--tube", "a", "--delay", "2h")
    put(db, "sooner", "--tube", "b", "--delay", "1h")
    put(db, "routine", "--tube", "a", "--priority", "500")
    urgent = put(db, "urgent", "--tube", "b", "--priority", "5")
    put(db, "urgent too", "--tube", "a", "--priority", "5")  # same priority, put later
    buried = put(db, "bad", "--tube", "thumbs")
    run(db, "reserve", "--tube", "thumbs")
    run(db, "bury", str(buried), "--reason", "corrupt image")
    run(db, "bury", str(held), "--reason", "later")  # buried after, though older
    run(db, "reserve", "--tube", "a", "--tube", "b")  # "urgent": ready again below
    run(db, "release", str(urgent))
    assert run(db, "peek", "--ready", "--raw").stdout == "urgent"
    assert run(db, "peek", "--delayed", "--raw").stdout == "sooner"
    shown = run(db, "peek", "--buried").stdout  # the oldest job: the order of one tube
    assert "held" in shown and "later" in shown
    run(db, "kick-job", str(held))
    shown = run(db, "peek", "--buried").stdout
    assert "bad" in shown and "corrupt image" in shown
    assert json.loads(run(db, "peek", "--buried", "--json").stdout)["tube"] == "thumbs"
    # --tube still narrows the look to one tube
    assert run(db, "peek", "--ready", "--tube", "a", "--raw").stdout == "urgent too"
    assert "no buried job in tube default" in run(db, "peek", "--buried", "-t", "default",
                                                   code=3).stderr


def test_stats(db: Path) -> None:
    put(db, "a", "--tube", "emails")
    whole = json.loads(run(db, "stats", "--json").stdout)
    assert whole["current-jobs-ready"] == 1 and whole["total-jobs"] == 1
    assert re.search(r"^current-jobs-ready:\s+1$", run(db, "stats").stdout, re.M)
    tube = json.loads(run(db, "stats", "--tube", "emails", "--json").stdout)
    assert tube["current-jobs-ready"] == 1
    record = json.loads(run(db, "stats", "--job", "1", "--json").stdout)
    assert record["id"] == 1 and record["tube"] == "emails" and record["state"] == "ready"
    run(db, "stats", "--job", "99", code=3)
    assert json.loads(run(db, "stats", "--tube", "nosuch", "--json").stdout)["total-jobs"] == 0
    run(db, "stats", "--job", "1", "--tube", "emails", code=2)


def test_tubes(db: Path) -> None:
    put(db, "a", "--tube", "b-tube")
    put(db, "a", "--tube", "a-tube")
    assert run(db, "tubes").stdout.split() == ["a-tube", "b-tube", "default"]
    names = [json.loads(line)["name"] for line in run(db, "tubes", "--json").stdout.splitlines()]
    assert names == ["a-tube", "b-tube", "default"]


def test_pause(db: Path) -> None:
    put(db, "a", "--tube", "p")
    assert "paused tube p" in run(db, "pause", "p", "1h").stdout
    run(db, "reserve", "--tube", "p", "--timeout", "0", code=4)
    assert run(db, "pause", "p", "0").stdout.strip() == "unpaused tube p"
    run(db, "reserve", "--tube", "p", "--timeout", "0")


def test_top_once(db: Path) -> None:
    put(db, "a", "--tube", "emails")
    put(db, "b", "--tube", "emails", "--delay", "1h")
    put(db, "c", "--tube", "emails", "--after", "1")
    out = run(db, "top", "--once").stdout
    assert re.search(r"^emails\s+1\s+0\s+0\s+1\s+0\s+1$", out, re.M), out  # 1 waiting
    assert "READY" in out and "WAITING" in out and "\x1b" not in out


# --- arguments: durations, tubes, priorities, --db --------------------------------------


@pytest.mark.parametrize(("text", "seconds"), [("30", 30), ("1.5", 1.5), ("500ms", 0.5),
                                                 ("10s", 10), ("5m", 300), ("2h", 7200),
                                                 ("1d", 86400)])
def test_durations(db: Path, text: str, seconds: float) -> None:
    put(db, "x", "--delay", text, "--ttr", text)
    record = job(db, 1)
    assert record["ttr"] == max(seconds, 1)
    before = time.time() * 1000
    assert abs(record["delay_until"] - (before + seconds * 1000)) < 5000


@pytest.mark.parametrize(("args", "option"), [
    (["put", "x", "--delay", "5x"], "--delay"),
    (["put", "x", "--ttr", "-1"], "--ttr"),
    (["reserve", "--timeout", "soon"], "--timeout"),
    (["release", "1", "--delay", "1w"], "--delay"),
    (["put", "x", "--tube", "-bad"], "--tube"),
    (["put", "x", "--tube", "a b"], "--tube"),
    (["reserve", "--tube", "ok", "--tube", "n/a!"], "--tube"),
    (["put", "x", "--priority", "4294967296"], "--priority"),
    (["put", "x", "--priority", "high"], "--priority"),
    (["delete", "abc"], "ID"),
    (["pause", "t", "forever"], "DURATION"),
])
def test_bad_arguments_are_usage_errors_naming_the_option(absent: Path, args: list[str],
                                                          option: str) -> None:
    result = run(absent, *args, code=2)
    assert option in result.stderr
    assert not absent.exists()  # nothing was opened, let alone created


def test_unknown_command_and_option(db: Path) -> None:
    run(db, "frobnicate", code=2)
    run(db, "put", "x", "--frob", code=2)


def test_db_after_the_command_says_where_it_goes() -> None:
    for args in (["put", "x", "--db", "q.db"], ["put", "x", "--db=q.db"],
                 ["work", "--db", "q.db", "--", "true"]):
        result = CliRunner().invoke(cli, args)
        assert result.exit_code == 2, result.output
        assert_one_line_error(result.stderr)
        assert f"--db goes before the command: sqlq --db PATH {args[0]} " in result.stderr
        assert "--tube" not in result.stderr  # click's guess, which pointed away from it


def test_db_from_environment_and_default(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    runner = CliRunner()
    env_db = tmp_path / "env.db"
    assert runner.invoke(cli, ["put", "x"], env={"SQLQ_DB": str(env_db)}).exit_code == 0
    assert env_db.exists()
    other = tmp_path / "other.db"  # --db wins over $SQLQ_DB
    assert runner.invoke(cli, ["--db", str(other), "put", "x"],
                         env={"SQLQ_DB": str(env_db)}).exit_code == 0
    assert other.exists()
    monkeypatch.chdir(tmp_path)
    assert runner.invoke(cli, ["put", "x"], env={"SQLQ_DB": None}).exit_code == 0
    assert (tmp_path / "sqlq.db").exists()


def test_version_names_each_backends_schema_version() -> None:
    from sqlq.backends.postgres.migrate import LATEST as POSTGRES
    from sqlq.backends.sqlite.migrate import LATEST as SQLITE

    for flag in ("--version", "-V"):
        result = CliRunner().invoke(cli, [flag])
        assert result.exit_code == 0, result.output
        assert result.output == (f"sqlq, version {sqlq.__version__} "
                                 f"(schema: SQLite {SQLITE}, PostgreSQL {POSTGRES})\n")


# --- errors: one line, right code, no traceback -------------------------------------------


def test_read_only_commands_do_not_create_a_database(absent: Path) -> None:
    for args in (["peek", "1"], ["stats"], ["tubes"], ["delete", "1"], ["kick", "1"]):
        assert "no database" in run(absent, *args, code=1).stderr
    assert not absent.exists()


def test_a_url_of_another_database_is_refused_as_such(tmp_path: Path) -> None:
    """newcomer.md #53: mysql://... read "no database at mysql://..." (taken for a path)."""
    for args in (["stats"], ["put", "x"], ["peek", "--buried"]):
        result = run("mysql://app@db.internal/app", *args, code=1)  # type: ignore[arg-type]
        assert "unsupported database URL scheme mysql://" in result.stderr
    with pytest.raises(sqlq.DatabaseError, match="scheme redis://"):
        sqlq.Queue("redis://localhost/0")
    assert list(tmp_path.iterdir()) == []


def test_missing_directory(tmp_path: Path) -> None:
    result = run(tmp_path / "nope" / "q.db", "put", "x", code=1)
    assert "nope" in result.stderr


def test_foreign_and_corrupt_files(tmp_path: Path) -> None:
    text = tmp_path / "notes.txt"
    text.write_text("not a database at all, just some text that is long enough " * 50)
    assert "notes.txt" in run(text, "put", "x", code=1).stderr
    import apsw

    foreign = tmp_path / "app.db"
    conn = apsw.Connection(str(foreign))
    conn.execute("CREATE TABLE users(id INTEGER PRIMARY KEY, name TEXT)")
    conn.close()
    run(foreign, "put", "x", code=1)
    run(foreign, "stats", code=1)


def test_sqlq_errors_map_to_codes(db: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    put(db)
    for exc, code in [(sqlq.JobNotFound("job 1 not found"), 3), (sqlq.Timeout("late"), 4),
                      (sqlq.DatabaseError(f"{db}: disk full, nothing was written"), 1),
                      (sqlq.JobLost("lost"), 1), (sqlq.SchemaError("newer"), 1),
                      (OSError(28, "No space left on device"), 1), (RuntimeError("bug"), 1)]:
        def fail(*args: Any, _exc: BaseException = exc, **kwargs: Any) -> Any:
            raise _exc

        monkeypatch.setattr(sqlq.Queue, "stats", fail)
        result = run(db, "stats", code=code)
        assert str(exc).split()[-1] in result.stderr


# --- real processes ---------------------------------------------------------------------------


def sqlq_command(how: str) -> list[str]:
    """How a user runs sqlq: the console script, or ``python -m sqlq``."""
    if how == "module":
        return [sys.executable, "-m", "sqlq"]
    script = BIN_DIR / "sqlq"
    if not script.exists():
        pytest.skip("the sqlq console script is not installed here (pip install -e .)")
    return [str(script)]


def spawn(command: list[str], db: Path, *args: str | bytes, **kwargs: Any) -> Any:
    return forkserver.run([*command, "--db", str(db), *args], capture_output=True, timeout=60,
                          **kwargs)


@pytest.mark.slow
@pytest.mark.parametrize("how", ["script", "module"])
def test_subprocess_round_trip(how: str, db: Path) -> None:
    command = sqlq_command(how)
    help_text = forkserver.run([*command, "--help"], capture_output=True, text=True).stdout
    assert help_text.startswith("Usage: sqlq [OPTIONS] COMMAND")
    done = spawn(command, db, "put", "-", input=BINARY)
    assert done.returncode == 0 and done.stdout == b"1\n", done.stderr
    done = spawn(command, db, "put", b"argv \xff\xfe bytes")  # not UTF-8: passed exactly
    assert done.returncode == 0, done.stderr
    assert spawn(command, db, "peek", "2", "--raw").stdout == b"argv \xff\xfe bytes"
    done = spawn(command, db, "reserve", "--timeout", "0", "--raw")
    assert done.returncode == 0 and done.stdout == BINARY
    for args, code in [(("peek", "999"), 3), (("reserve", "-t", "none", "--timeout", "0"), 4),
                       (("put", "x", "--delay", "soon"), 2), (("delete", "1"), 0)]:
        done = spawn(command, db, *args)
        assert done.returncode == code, (args, done.stderr)
        if code:
            assert_one_line_error(done.stderr.decode())


def test_subprocess_put_without_body_on_a_terminal_is_a_usage_error(db: Path) -> None:
    import pty

    controller, terminal = pty.openpty()
    try:
        done = spawn([sys.executable, "-m", "sqlq"], db, "put", stdin=terminal)
    finally:
        os.close(controller)
        os.close(terminal)
    assert done.returncode == 2
    assert_one_line_error(done.stderr.decode())
    assert b"BODY" in done.stderr



def waiting_for_jobs(db: str) -> bool:
    """Whether some process waits for jobs on db: the sidecar of a file exists with its
    wakeup file, or a PostgreSQL session has run LISTEN."""
    if "://" not in db:
        return Path(f"{db}-sqlq").is_dir() and any(Path(f"{db}-sqlq").iterdir())
    import psycopg

    with psycopg.connect(db, autocommit=True) as conn:
        row = conn.execute("SELECT count(*) FROM pg_stat_activity WHERE datname ="
                           " current_database() AND query ILIKE 'LISTEN%'").fetchone()
    return bool(row and row[0])


def test_subprocess_ctrl_c_while_waiting(db: Path) -> None:
    # As from a terminal: SIGINT at its default, even where this run was started with it
    # ignored (a background job), which every child would inherit.
    proc = forkserver.Popen([sys.executable, "-m", "sqlq", "--db", str(db), "reserve"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    # Wait until it is waiting (on a file, its queue has made the sidecar directory it
    # watches; on PostgreSQL, its session listens), so the signal meets sqlq's handler
    # rather than Python's start-up.
    wait_for(lambda: waiting_for_jobs(str(db)), what="sqlq reserve to wait")
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=20)
    # What it said, if it ended otherwise: once (ci, 2026-12) it died of the SIGINT itself
    # (-2), which only a process already exiting (its handler reset) would: why, unknown.
    assert proc.returncode == 130, (proc.returncode, out.decode()[-500:], err.decode()[-1500:])
    assert_one_line_error(err.decode())


def test_subprocess_broken_pipe(db: Path) -> None:
    CliRunner().invoke(cli, ["--db", str(db), "put", "-"], input=b"x" * 500_000)
    shell = f"{sys.executable} -m sqlq --db {db} peek 1 --raw | head -c 10"
    done = subprocess.run(["bash", "-o", "pipefail", "-c", shell], capture_output=True,
                          timeout=60)
    assert done.stdout == b"x" * 10
    assert b"Traceback" not in done.stderr and done.returncode in (0, 141)


@pytest.mark.sqlite_only  # about the file (never created; a full disk)
def test_subprocess_full_disk(db: Path) -> None:
    """A file-size limit makes the kernel refuse writes as a full disk would."""
    import resource

    CliRunner().invoke(cli, ["--db", str(db), "put", "small"])

    def limit() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (256 * 1024, 256 * 1024))

    done = spawn([sys.executable, "-m", "sqlq"], db, "put-many", input=os.urandom(900_000)
                 .hex().encode()[:1_000_000].replace(b"0", b"\n"), preexec_fn=limit)
    assert done.returncode == 1, done.stderr
    assert_one_line_error(done.stderr.decode())
    # Nothing half-written: the file still works and holds only the first job.
    assert json.loads(run(db, "stats", "--json").stdout)["total-jobs"] == 1


#: What ``python -m sqlq`` imports: sqlq and its dependencies (pyproject.toml).
_RUNTIME = ("sqlq", "apsw", "click", "tenacity", "cronsim", "typing_extensions")


def _readable_by_anyone() -> Path:
    """A directory any user can enter, holding a copy of sqlq and what it imports.

    The checkout and its venv may sit where only their owner can read (under /root,
    or in a ``mktemp -d`` directory, mode 0700), and so may pytest's own tmp_path: a
    child run as another user must need neither.
    """
    where = Path(tempfile.mkdtemp(prefix="sqlq-anyone-"))
    where.chmod(0o755)
    lib = where / "lib"
    lib.mkdir()
    for name in _RUNTIME:
        try:
            module = importlib.import_module(name)
        except ImportError:  # an optional one (typing-extensions from Python 3.13)
            continue
        source = Path(str(module.__file__))
        if source.stem.split(".")[0] == "__init__":
            shutil.copytree(source.parent, lib / name,
                            ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(source, lib / source.name)
    for path in (where, *lib.rglob("*")):
        path.chmod(0o755 if path.is_dir() else 0o644)
    return where


def test_subprocess_read_only_directory() -> None:
    as_root = os.geteuid() == 0
    if as_root and not shutil.which("setpriv"):
        pytest.skip("running as root, and setpriv is missing to drop privileges")
    prefix = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"] if as_root else []
    where = _readable_by_anyone()
    directory = where / "ro"
    directory.mkdir()
    directory.chmod(0o555)
    # The interpreter itself, not the venv's link to it (which lies in the checkout).
    python = os.path.realpath(sys.executable)
    try:
        done = subprocess.run([*prefix, python, "-s", "-m", "sqlq", "--db",
                               str(directory / "q.db"), "put", "x"], capture_output=True,
                              timeout=60, cwd="/", env={**os.environ,
                                                        "PYTHONPATH": str(where / "lib")})
    finally:
        directory.chmod(0o755)
        shutil.rmtree(where, ignore_errors=True)
    assert done.returncode == 1, done.stderr
    assert_one_line_error(done.stderr.decode())
    assert b"q.db" in done.stderr


# --- sqlq work's first minute: a typo in --db, a module that does not import -----------------


def _work(cwd: Path, *args: str, env: dict[str, str] | None = None
          ) -> subprocess.CompletedProcess[str]:
    return forkserver.run([sys.executable, "-m", "sqlq", *args], capture_output=True, text=True,
                          timeout=60, cwd=cwd, env={**os.environ, **(env or {})})


@pytest.mark.slow
def test_work_refuses_a_missing_file_unless_told_to_create_it(tmp_path: Path) -> None:
    for how in (["--db", "typo.db"], []):
        done = _work(tmp_path, *how, "work", "--burst", "--", "true",
                     env={"SQLQ_DB": "typo.db"})
        assert done.returncode == 1, done.stderr
        assert_one_line_error(done.stderr)
        assert "no database at typo.db" in done.stderr and "--init" in done.stderr
        assert not (tmp_path / "typo.db").exists()
    done = _work(tmp_path, "--db", "typo.db", "work", "--init", "--burst", "--", "true")
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "typo.db").exists()
    # The log says which file, in full: a typo is seen at once.
    assert f"1 worker on {tmp_path / 'typo.db'}" in done.stderr  # not "1 workers"
    assert f"on {tmp_path / 'typo.db'}" in done.stderr.split("watching", 1)[1]


def test_work_names_a_task_module_that_fails_to_import(tmp_path: Path) -> None:
    (tmp_path / "badmod.py").write_text("import os\nratio = 1 / 0\n")
    done = _work(tmp_path, "--db", "q.db", "work", "--import", "badmod")
    assert done.returncode == 1, done.stderr
    assert_one_line_error(done.stderr)
    assert "cannot import badmod: ZeroDivisionError: division by zero" in done.stderr
    assert f"{tmp_path / 'badmod.py'}, line 2" in done.stderr
    assert "SQLQ_DEBUG=1" in done.stderr
    debug = _work(tmp_path, "--db", "q.db", "work", "--import", "badmod",
                  env={"SQLQ_DEBUG": "1"})
    assert "Traceback" in debug.stderr and "ratio = 1 / 0" in debug.stderr
    missing = _work(tmp_path, "--db", "q.db", "work", "--import", "nosuchmodule")
    assert missing.returncode == 1
    assert_one_line_error(missing.stderr)
    assert "cannot import nosuchmodule" in missing.stderr
    assert str(tmp_path) in missing.stderr and "PYTHONPATH" in missing.stderr
    # A module that leaves at import (checked in a child of the supervisor: it must not
    # go on as a second supervisor) is said in one line too; no worker started.
    (tmp_path / "quits.py").write_text("import sys\nsys.exit(3)\n")
    quits = _work(tmp_path, "--db", "q.db", "work", "--import", "quits")
    assert quits.returncode == 1, quits.stderr
    assert_one_line_error(quits.stderr)
    assert "SystemExit: 3" in quits.stderr and "watching" not in quits.stderr


# --- the worker loop of docs/shell.md, run as written -------------------------------------------


@pytest.mark.slow
def test_shell_worker_loop_from_the_docs(tmp_path: Path) -> None:
    doc = (ROOT / "docs" / "shell.md").read_text()
    loop = next(block for block in re.findall(r"```sh\n(.*?)```", doc, re.S)
                if "while id=" in block)
    assert len(loop.strip().splitlines()) <= 10
    db = tmp_path / "jobs.db"
    handler = tmp_path / "make-thumbnail"
    handler.write_text(f"#!/bin/sh\nbody=$(cat)\necho \"$body\" >> {tmp_path}/done\n"
                       "[ \"$body\" != bad ]\n")
    handler.chmod(0o755)
    script = loop.replace("/var/lib/app/jobs.db", str(db)).replace("./make-thumbnail",
                                                                     str(handler))
    env = {**os.environ, "PATH": f"{BIN_DIR}{os.pathsep}{os.environ['PATH']}"}
    if not (BIN_DIR / "sqlq").exists():  # no console script installed: a stand-in
        (tmp_path / "bin").mkdir()
        (tmp_path / "bin" / "sqlq").write_text(f"#!/bin/sh\nexec {sys.executable} -m sqlq \"$@\"\n")
        (tmp_path / "bin" / "sqlq").chmod(0o755)
        env["PATH"] = f"{tmp_path / 'bin'}{os.pathsep}{env['PATH']}"
    worker = subprocess.Popen(["sh", "-c", script], env=env, stdout=subprocess.DEVNULL,
                              stderr=subprocess.PIPE, start_new_session=True)
    try:
        CliRunner().invoke(cli, ["--db", str(db), "put-many", "--tube", "thumbs"],
                           input="one\nbad\ntwo\n")
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            counts = json.loads(run(db, "stats", "--json").stdout)
            if counts["current-jobs-buried"] == 1 and counts["current-jobs-ready"] == 0 \
                    and counts["current-jobs-reserved"] == 0:
                break
            time.sleep(0.1)
        assert (tmp_path / "done").read_text().split() == ["one", "bad", "two"]
        buried = job(db, 2)
        assert buried["state"] == "buried" and buried["bury_reason"] == "make-thumbnail failed"
        assert counts["current-jobs-ready"] == 0
    finally:
        os.killpg(worker.pid, signal.SIGTERM)
        worker.wait(timeout=10)


# --- durations and safe display, as units ------------------------------------------------------


@given(st.integers(min_value=0, max_value=10**9), st.sampled_from(["ms", "s", "m", "h", "d"]))
def test_parse_duration_units(number: int, unit: str) -> None:
    factor = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400}[unit]
    if number * factor > MAX_SECONDS:  # past beanstalkd's bound, as delay and TTR are
        with pytest.raises(ValueError, match="at most"):
            parse_duration(f"{number}{unit}")
        return
    assert parse_duration(f"{number}{unit}") == pytest.approx(number * factor)
    assert parse_duration(f" {number} {unit.upper()} ") == pytest.approx(number * factor)


@pytest.mark.parametrize("text", ["", "-1", "5x", "1e3", "inf", "nan", "1.2.3", "ms", "1 h 2m",
                                  "\uff11\uff12", "\u0663", "1\u0663s", "5\u2003m",
                                  "99999999999d", "4294967296", "49711d"])
def test_parse_duration_refuses(text: str) -> None:
    with pytest.raises(ValueError, match="not a duration"):
        parse_duration(text)


@pytest.mark.parametrize(("seconds", "text"), [(0.25, "250ms"), (1.5, "1.5s"), (42, "42s"),
                                               (303, "5m03s"), (7800, "2h10m"), (300000, "3d11h")])
def test_format_duration(seconds: float, text: str) -> None:
    assert format_duration(seconds) == text


def test_display_text_is_safe_for_a_terminal() -> None:
    assert display_text("plain text\nwith\ttabs é") == "plain text\nwith\ttabs é"
    assert display_text(b"\x1b]0;owned\x07\xff") == "\\x1b]0;owned\\x07\\xff"
    assert display_text("\u202e") == "\\u202e"  # right-to-left override: not shown raw
    long = display_text(b"\x00" * 5000)
    assert len(long) < 2100 and long.endswith("(5000 bytes in all; --raw writes them)")
