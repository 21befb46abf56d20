"""A live holder keeps its jobs through a server that lets nobody in for longer than the
grace (reliability.md F11), and a keeper says what it found when it is back.

The reaper once counted a holder's silence from ``pg_postmaster_start_time()`` at the
earliest. But a crashed server recovers (fsync, WAL replay, a checkpoint) before it
accepts anyone: 12-13 s in the report, far longer on a big server. The first worker on
another host to get in then found the holder's lock free and its keeper "silent" for
longer than the grace, and handed its job out 0.1 s after the server opened, while the
holder's keeper said "its reservations stand".

A long recovery is made here deterministic through ``pg_hba.conf``, not a pile of WAL
(whose replay time depends on the machine): the server, once up, rejects the holder's
and the other worker's connections for longer than the grace; then it lets the other
worker in first (the race the report saw it win, 3 of 3), and the holder a moment
later. The other worker runs in a pid namespace of its own, standing for another host
(``owners.place()``: the holder's pid means nothing there). Each test owns its server:
it rewrites its pg_hba.conf, restarts it and crashes it.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator

import psycopg
import pytest

import sqlq
from sqlq.backends.postgres.owners import GRACE_S
from tests import forkserver
from tests.conftest import ROOT
from tests.integration.test_pg_liveness import HOLDER as LIVENESS_HOLDER
from tests.pgserver import PgServer
from tests.timing import PATIENCE

pytestmark = pytest.mark.slow

#: test_pg_liveness's holder (reserves, says so, works without touching the database
#: until told, then deletes under its lease and says how that went), logging to stderr:
#: the keeper's words are what these tests read.
HOLDER = "import logging; logging.basicConfig(level=logging.WARNING)\n" + LIVENESS_HOLDER

#: The worker on "another host": gets in as soon as it is let in, reserves without
#: waiting (a claim that finds nothing looks for dead holders), says what it got; then,
#: told to, reserves for the given seconds and says what it got.
THIEF = """
import sys, time, sqlq
while True:
    try:
        q = sqlq.Queue(sys.argv[1])
        break
    except sqlq.DatabaseError:
        time.sleep(0.05)
job = q.reserve("t", timeout=0)
print("none" if job is None else job.id, flush=True)
sys.stdin.readline()
job = q.reserve("t", timeout=float(sys.argv[2]))
print("none" if job is None else job.id, flush=True)
"""

#: Reserves a job of tube "u" and says so; then is SIGKILLed by the test.
DIES = """
import sys, time, sqlq
q = sqlq.Queue(sys.argv[1])
print(q.reserve("u", timeout=30).id, flush=True)
time.sleep(600)
"""

ADMIN = "local all all trust\nhost all postgres 127.0.0.1/32 trust\n"
OPEN = ADMIN + "host all all 127.0.0.1/32 trust\n"
CLOSED = ADMIN + "host all all 127.0.0.1/32 reject\n"
THIEF_ONLY = ADMIN + "host all thief 127.0.0.1/32 trust\nhost all all 127.0.0.1/32 reject\n"


@pytest.fixture
def server() -> Iterator[PgServer]:
    """A server of this test's own, with a migrated database ``r`` and two superuser
    roles, ``holder`` and ``thief``, each let in or not by pg_hba.conf."""
    with PgServer() as pg:
        _hba(pg, OPEN)
        pg.psql("CREATE ROLE holder LOGIN SUPERUSER; CREATE ROLE thief LOGIN SUPERUSER")
        pg.create_database("r")
        with sqlq.Queue(pg.url_for("r")):
            pass  # migrated
        yield pg


def _url(pg: PgServer, role: str) -> str:
    return f"postgresql://{role}@127.0.0.1:{pg.port}/r"


def _hba(pg: PgServer, rules: str) -> None:
    """Replace pg_hba.conf (its owner stays the server's) and have the server reload it."""
    with open(pg.data / "pg_hba.conf", "w") as f:
        f.write(rules)
    if pg.running:
        pg.psql("SELECT pg_reload_conf()")


def _until(what: str, check: object) -> None:
    deadline = time.monotonic() + PATIENCE + 30
    while not check():  # type: ignore[operator]
        assert time.monotonic() < deadline, f"gave up waiting for {what}"
        time.sleep(0.05)


def _rejects(pg: PgServer, role: str) -> bool:
    try:
        psycopg.connect(_url(pg, role), connect_timeout=5).close()
    except psycopg.OperationalError as e:
        return "pg_hba.conf rejects" in str(e)
    return False


def _recovered(pg: PgServer) -> bool:
    """Whether the server logged its reinitialisation after a crash, and then that it
    accepts connections again."""
    log = pg.log_path.read_text(errors="replace")
    crash = log.rfind("all server processes terminated; reinitializing")
    return crash >= 0 and "ready to accept connections" in log[crash:]


def _silent_by_the_old_rule(pg: PgServer) -> bool:
    """Whether the holder has been silent for the grace as the reaper once counted it:
    its last heartbeat and the postmaster's start both more than GRACE_S ago."""
    try:
        out = pg.psql("SELECT extract(epoch FROM now() - greatest(max(seen_at), "
                      "pg_postmaster_start_time())) FROM sqlq_owners", "r")
    except RuntimeError:  # still recovering
        return False
    return float(out) > GRACE_S + 0.5


def _other_host(code: str, *args: str) -> subprocess.Popen[str]:
    """A Python snippet in a pid namespace of its own (another host, to the reaper)."""
    assert shutil.which("unshare"), "util-linux's unshare is needed (Debian: util-linux)"
    argv = ["unshare", "--pid", "--fork", "--kill-child", "--mount-proc"] \
        if os.geteuid() == 0 else \
        ["unshare", "--user", "--map-root-user", "--pid", "--fork", "--kill-child"]
    return forkserver.Popen([*argv, sys.executable, "-c", code, *args],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True,
                            env=dict(os.environ, PYTHONPATH=str(ROOT)))


def _say(proc: subprocess.Popen[str], line: str = "go") -> None:
    assert proc.stdin is not None
    proc.stdin.write(line + "\n")
    proc.stdin.flush()


def _start_holder(pg: PgServer) -> tuple[int, subprocess.Popen[str]]:
    """A job put, and the HOLDER process (as role holder) that will reserve it."""
    with sqlq.Queue(pg.url_for("r")) as q:
        job_id = q.put(b"long", tube="t", ttr=300)
    holder = forkserver.Popen([sys.executable, "-c", HOLDER, _url(pg, "holder")],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True,
                              env=dict(os.environ, PYTHONPATH=str(ROOT)))
    return job_id, holder


def _read(proc: subprocess.Popen[str]) -> str:
    from tests.integration.test_pg_liveness import _line

    return _line(proc, timeout=PATIENCE + 60)


def _note_the_epoch(pg: PgServer) -> None:
    """Have a worker find a dead holder (its lock free), which writes down when a
    reaper first looked at the server as it runs now (sqlq_server_epoch): that must not
    outlive a crash (a table that is not UNLOGGED would)."""
    with sqlq.Queue(pg.url_for("r")) as q:
        dead_id = q.put(b"x", tube="u")
        dies = forkserver.Popen([sys.executable, "-c", DIES, pg.url_for("r")],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                env=dict(os.environ, PYTHONPATH=str(ROOT)))
        try:
            assert int(_read(dies)) == dead_id
        finally:
            dies.kill()
            dies.wait()
        assert q.reserve("t", timeout=0) is None  # it looks for dead holders
    assert pg.psql("SELECT count(*) FROM sqlq_server_epoch", "r") == "1"


def _crash_a_backend(pg: PgServer) -> None:
    """SIGKILL one backend: the postmaster ends every session and recovers from the
    crash, as after an OOM kill, without a new start time."""
    backend = next(s.pid for s in pg.sessions("r"))
    os.kill(backend, signal.SIGKILL)


@pytest.mark.parametrize("disturbance", ["immediate restart", "crashed backend"])
def test_a_holder_keeps_its_job_through_a_recovery_longer_than_the_grace(
        server: PgServer, disturbance: str) -> None:
    pg = server
    job_id, holder = _start_holder(pg)
    thief = None
    try:
        assert int(_read(holder)) == job_id
        _note_the_epoch(pg)
        _hba(pg, CLOSED)
        if disturbance == "immediate restart":
            pg.restart("immediate")  # pg_ctl -w: up, rejecting everyone but the admin
        else:
            _until("the new rules", lambda: _rejects(pg, "thief"))
            _crash_a_backend(pg)
            _until("the recovery", lambda: _recovered(pg))
        # Long enough for the old rule to take the holder for dead.
        _until("the holder to be silent for the grace", lambda: _silent_by_the_old_rule(pg))
        _hba(pg, THIEF_ONLY)
        opened = time.monotonic()
        thief = _other_host(THIEF, _url(pg, "thief"), str(GRACE_S + 2))
        assert _read(thief) == "none", "the worker on another host took the live holder's job"
        _hba(pg, OPEN)  # the holder's keeper gets in now, after the other worker
        _say(thief)
        assert _read(thief) == "none", "the worker on another host took the live holder's job"
        print(f"\nno second delivery in {time.monotonic() - opened:.1f} s after the server "
              "let workers in")
        _say(holder)
        assert _read(holder) == "deleted"
    finally:
        for proc in (holder, thief):
            if proc is not None:
                proc.kill()
                proc.wait()
    log = holder.stderr.read() if holder.stderr else ""
    assert "all 1 of its reservations stand" in log, log


def test_a_keeper_back_after_the_grace_says_its_jobs_were_handed_out(server: PgServer) -> None:
    """The other side of the rule: a holder that cannot reach the server for longer
    than the grace while another host can is presumed dead, and its keeper, back,
    says how many of its reservations went (it once said they all stood)."""
    pg = server
    job_id, holder = _start_holder(pg)
    log: list[str] = []
    assert holder.stderr is not None
    reader = threading.Thread(target=lambda: log.extend(holder.stderr), daemon=True)  # type: ignore[arg-type]
    reader.start()
    thief = None
    try:
        assert int(_read(holder)) == job_id
        _hba(pg, THIEF_ONLY)
        _until("the new rules", lambda: _rejects(pg, "holder"))
        pg.psql("SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                " WHERE usename = 'holder'")
        thief = _other_host(THIEF, _url(pg, "thief"), str(GRACE_S + 30))
        assert _read(thief) == "none"  # not silent for the grace yet
        _say(thief)
        assert _read(thief) == str(job_id)  # now it is
        _hba(pg, OPEN)
        _until("the keeper back", lambda: any("is back after" in line for line in log))
        _say(holder)
        assert _read(holder).startswith("JobLost")
    finally:
        for proc in (holder, thief):
            if proc is not None:
                proc.kill()
                proc.wait()
    reader.join(10)
    text = "".join(log)
    assert "1 of its 1 reservations were handed out" in text, text
    assert "stand" not in text, text
