"""``sqlq serve --processes N``: N server processes on one port, over a real file or a real
PostgreSQL database, real sockets, real signals.

A connection lives in one process; a job put through one process is reserved through
another, a reserve blocked in one is woken by a put in the other; the parent starts a
killed process again, stops them all on SIGTERM, and takes them with it when it is
SIGKILLed. The end of this module runs a representative part of the one-process
protocol tests (test_server.py, test_server_stats.py) against two processes.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import greenstalk
import pytest

import sqlq
from tests import forkserver
from tests.conftest import ROOT
from tests.integration.test_server import (  # noqa: F401 - run here against two processes
    test_closed_connection_releases_its_jobs_at_once,
    test_delete_of_a_job_reserved_by_another_client,
    test_greenstalk_round_trip_and_stats,
    test_no_deadline_soon_for_a_job_an_administrator_took_away,
    test_not_found_replies,
    test_pipelined_commands_in_one_write,
    test_producer_and_worker_commands,
    test_ttr_expiry_gives_the_job_to_another_client,
)
from tests.integration.test_server_stats import (  # noqa: F401 - the same, two processes
    test_stats_are_exact_after_writes_through_other_connections,
)
from tests.servers import BeanstalkdProcess, Raw, free_port
from tests.timing import soon
from tests.workers import wait_for


class Group(BeanstalkdProcess):
    """``sqlq serve --processes N`` on a free loopback port."""

    def __init__(self, location: str, processes: int = 2) -> None:
        super().__init__(None, "--processes", str(processes), "--max-job-size", "65535",
                         serve=True, location=location)  # the size test_server.py's have
        self.path = location
        self.processes = processes


@pytest.fixture
def group(db_url: str) -> Iterator[Group]:
    running = Group(db_url)
    yield running
    running.stop()


# The protocol tests imported above take these: the same names, two processes behind them.
srv = server = group


@pytest.fixture
def raw(group: Group) -> Iterator[Raw]:
    client = Raw(group.address)
    yield client
    client.close()


def stats(client: Raw) -> dict[str, str]:
    body = client.cmd(b"stats").split(b"\r\n", 1)[1]
    pairs = (row.split(": ", 1) for row in body[4:-3].decode().splitlines())
    return {k: v for k, v in pairs}


def one_in_each(address: tuple[str, int], processes: int = 2) -> dict[str, Raw]:
    """A connection to each process, by its ``pid`` (stats has beanstalkd's keys only), in
    the order found: connections
    are opened until the kernel's hash has sent one to each (the others are closed), for
    a while: a process being started again gets none until its socket is bound."""
    found: dict[str, Raw] = {}
    deadline = time.monotonic() + soon(10)
    while time.monotonic() < deadline:
        client = Raw(address)
        which = stats(client)["pid"]
        if which in found:
            client.close()
        else:
            found[which] = client
            if len(found) == processes:
                return found
    raise AssertionError(f"connections reached only {sorted(found)}")


def another_on(address: tuple[str, int], which: str) -> Raw:
    """One more connection, to the process whose pid is ``which``."""
    for _ in range(1000):
        client = Raw(address)
        if stats(client)["pid"] == which:
            return client
        client.close()
    raise AssertionError(f"1000 connections never reached {which}")


def gone(pid: int) -> bool:
    """The process has exited (a zombie waiting to be reaped counts as gone)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:  # no such file, or (ProcessLookupError) reaped while being read
        return True


def put(client: Raw, body: bytes) -> int:
    client.send(b"put 0 0 60 %d\r\n%s\r\n" % (len(body), body))
    reply = client.line()
    assert reply.startswith(b"INSERTED "), reply
    return int(reply.split()[1])


# ---- one queue, two processes -----------------------------------------------------------------


def test_a_job_put_through_one_process_is_reserved_through_the_other(group: Group) -> None:
    a, b = one_in_each(group.address).values()
    assert stats(a)["pid"] != stats(b)["pid"]
    job = put(a, b"hello")
    assert b.cmd(b"reserve-with-timeout 0") == b"RESERVED %d 5\r\nhello\r\n" % job
    assert a.cmd(b"reserve-with-timeout 0") == b"TIMED_OUT\r\n"  # held by b, not a's
    assert a.cmd(b"delete %d" % job) == b"NOT_FOUND\r\n"  # reserved by another client
    assert stats(a)["current-jobs-reserved"] == stats(b)["current-jobs-reserved"] == "1"
    assert b.cmd(b"delete %d" % job) == b"DELETED\r\n"


def test_a_blocked_reserve_wakes_on_a_put_in_the_other_process(group: Group) -> None:
    a, b = one_in_each(group.address).values()
    a_pid = stats(a)["pid"]
    a.send(b"reserve-with-timeout 20\r\n")
    beside = another_on(group.address, a_pid)  # a's own stats would wait behind its reserve
    wait_for(lambda: stats(beside)["current-waiting"] == "1", timeout=soon(5))
    started = time.monotonic()
    job = put(b, b"wake")
    assert a.reply() == b"RESERVED %d 4\r\nwake\r\n" % job
    assert time.monotonic() - started < soon()


def test_a_closed_connections_jobs_go_back_to_the_other_process_at_once(group: Group) -> None:
    a, b = one_in_each(group.address).values()
    job = put(a, b"x")
    assert a.cmd(b"reserve") == b"RESERVED %d 1\r\nx\r\n" % job
    b_pid = stats(b)["pid"]
    b.send(b"reserve-with-timeout 20\r\n")
    beside = another_on(group.address, b_pid)
    wait_for(lambda: stats(beside)["current-waiting"] == "1", timeout=soon(5))
    started = time.monotonic()
    a.close()
    assert b.reply() == b"RESERVED %d 1\r\nx\r\n" % job
    assert time.monotonic() - started < soon()


def test_stats_are_per_process_and_job_counts_the_queues(group: Group) -> None:
    a, b = one_in_each(group.address).values()
    extra = Raw(group.address)  # lands on one of them
    put(a, b"x")
    put(a, b"y")
    sa, sb = stats(a), stats(b)
    assert (sa["cmd-put"], sb["cmd-put"]) == ("2", "0")
    assert sa["current-jobs-ready"] == sb["current-jobs-ready"] == "2"
    assert int(sa["current-connections"]) + int(sb["current-connections"]) == 3
    assert sa["id"] != sb["id"] and sa["pid"] != sb["pid"]
    extra.close()


# ---- the parent ------------------------------------------------------------------------------


def test_a_killed_process_is_started_again_and_the_port_keeps_serving(group: Group) -> None:
    by = one_in_each(group.address)
    victim, survivor = map(int, by)
    os.kill(victim, signal.SIGKILL)
    assert by[str(victim)].closed_by_server()
    # Connections the kernel queued on the dying process's own socket are reset (unless
    # net.ipv4.tcp_migrate_req is set); once it is gone, the port answers throughout.
    wait_for(lambda: gone(victim), timeout=soon(5))
    for _ in range(20):
        client = Raw(group.address)
        assert client.cmd(b"list-tube-used") == b"USING default\r\n"
        client.close()
    again = one_in_each(group.address)
    assert str(survivor) in again and str(victim) not in again
    (started,) = set(again) - {str(survivor)}
    assert again[started].cmd(b"list-tube-used") == b"USING default\r\n"


def test_sigusr1_drains_every_process(group: Group) -> None:
    by = one_in_each(group.address)
    group.proc.send_signal(signal.SIGUSR1)
    wait_for(lambda: all(stats(c)["draining"] == "true" for c in by.values()),
             timeout=soon(5))
    for client in by.values():
        client.send(b"put 0 0 60 1\r\nx\r\n")
        assert client.line() == b"DRAINING\r\n"


def test_sigterm_stops_every_process_and_gives_their_jobs_back(group: Group) -> None:
    by = one_in_each(group.address)
    pids = [int(stats(c)["pid"]) for c in by.values()]
    first = next(iter(by.values()))
    job = put(first, b"held")
    assert first.cmd(b"reserve") == b"RESERVED %d 4\r\nheld\r\n" % job
    group.proc.send_signal(signal.SIGTERM)
    assert group.proc.wait(soon(10)) == 0
    assert all(gone(pid) for pid in pids)
    with pytest.raises(OSError):
        socket.create_connection(group.address, timeout=1)
    with sqlq.Queue(group.path) as q:
        assert q.stats_job(job)["state"] == "ready"


def test_the_processes_stop_when_the_parent_is_killed(group: Group) -> None:
    by = one_in_each(group.address)
    pids = [int(stats(c)["pid"]) for c in by.values()]
    group.proc.kill()
    group.proc.wait()
    wait_for(lambda: all(gone(pid) for pid in pids), timeout=soon(5))


def cmdline(pid: int) -> list[str]:
    with open(f"/proc/{pid}/cmdline", "rb") as f:
        return f.read().decode().split("\0")[:-1]


def test_run_as_the_command_the_parent_forks_its_processes(group: Group) -> None:
    """A fork runs what its parent loaded: no new interpreter, so its command line is the
    parent's; one started again after a death is forked too."""
    by = one_in_each(group.address)
    parent = cmdline(group.proc.pid)
    for pid in map(int, by):
        assert cmdline(pid) == parent, cmdline(pid)
    victim = int(next(iter(by)))
    os.kill(victim, signal.SIGKILL)
    wait_for(lambda: gone(victim), timeout=soon(5))
    again = one_in_each(group.address)
    assert str(victim) not in again
    assert all(cmdline(int(pid)) == parent for pid in again)
    first, second = again.values()
    job = put(first, b"x")
    assert second.cmd(b"reserve-with-timeout 5") == b"RESERVED %d 1\r\nx\r\n" % job


#: Programs whose parent cannot vouch for its process: one that calls ``sqlq.cli.cli``, and
#: the ``sqlq`` command itself with a thread running (as an exporter's, started at import).
NOT_ITS_OWN = {
    "inside another program": "import sys; from sqlq.cli import cli; cli(sys.argv[1:])",
    "with a thread running": "import sys, threading; threading.Thread(target=sys.stdin.read,"
                             " daemon=True).start(); from sqlq.cli import main; main()",
}


@pytest.mark.parametrize("program", NOT_ITS_OWN)
def test_where_the_parent_cannot_vouch_for_its_process_it_starts_new_interpreters(
        db_url: str, program: str) -> None:
    """Each child is then a new interpreter, and all else is the same."""
    port = free_port()
    proc = forkserver.Popen(
        [sys.executable, "-c", NOT_ITS_OWN[program], "--db", db_url, "serve", "--listen",
         f"127.0.0.1:{port}", "--processes", "2"],
        cwd=ROOT, stdin=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        address = ("127.0.0.1", port)
        wait_for(lambda: _connects(address), timeout=soon(10))
        by = one_in_each(address)
        for pid in map(int, by):
            assert "child_main" in " ".join(cmdline(pid)), cmdline(pid)
        first, second = by.values()
        job = put(first, b"x")
        assert second.cmd(b"reserve-with-timeout 5") == b"RESERVED %d 1\r\nx\r\n" % job
        pids = list(map(int, by))
        proc.kill()
        proc.wait()
        wait_for(lambda: all(gone(pid) for pid in pids), timeout=soon(5))
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        for stream in (proc.stdin, proc.stderr):
            assert stream is not None
            stream.close()


# ---- sqlq-beanstalkd -P -----------------------------------------------------------------------


def test_beanstalkd_processes_flag_temp_dir_and_bad_counts(tmp_path: Path) -> None:
    port = free_port()
    env = dict(os.environ, TMPDIR=str(tmp_path))
    proc = forkserver.Popen([sys.executable, "-m", "sqlq.server", "-l", "127.0.0.1", "-p",
                             str(port), "--processes=2"], cwd=ROOT, env=env)
    try:
        address = ("127.0.0.1", port)
        wait_for(lambda: _connects(address), timeout=soon(10))
        a, b = one_in_each(address).values()
        job = put(a, b"x")
        assert b.cmd(b"reserve-with-timeout 5") == b"RESERVED %d 1\r\nx\r\n" % job
        assert len(list(tmp_path.iterdir())) == 1  # one directory, shared
    finally:
        proc.terminate()
        assert proc.wait(soon(10)) == 0
    assert list(tmp_path.iterdir()) == []  # removed at exit
    run = [sys.executable, "-m", "sqlq.server", "-P"]
    for bad in ("0", "x", "100000"):
        out = forkserver.run([*run, bad], capture_output=True, text=True, cwd=ROOT)
        assert out.returncode == 5 and "-P" in out.stderr, out.stderr


def test_beanstalkd_processes_on_a_unix_socket_share_one_listener(tmp_path: Path) -> None:
    path = str(tmp_path / "bs.sock")
    proc = forkserver.Popen([sys.executable, "-m", "sqlq.server", "-l", f"unix:{path}", "-P",
                             "2", "-b", str(tmp_path)], cwd=ROOT)
    try:
        wait_for(lambda: _connects(path), timeout=soon(10))
        seen: set[str] = set()
        with greenstalk.Client(path) as c:
            c.put("x")
            seen.add(c.stats()["pid"])
            with greenstalk.Client(path) as d:
                assert d.reserve(timeout=5).body == "x"
    finally:
        proc.terminate()
        assert proc.wait(soon(10)) == 0
    assert not os.path.exists(path)  # removed once, by the parent


def test_a_process_that_cannot_open_the_queue_stops_the_group(tmp_path: Path) -> None:
    (tmp_path / "sqlq.db").mkdir()  # the directory is fine; the file in it cannot open
    port = free_port()
    out = forkserver.run([sys.executable, "-m", "sqlq.server", "-l", "127.0.0.1", "-p",
                          str(port), "-P", "2", "-b", str(tmp_path)],
                         capture_output=True, text=True, cwd=ROOT, timeout=soon(30))
    assert out.returncode == 1, out.stderr
    assert "sqlq-beanstalkd:" in out.stderr


def test_the_parent_binds_before_it_imports_the_queue() -> None:
    """``sqlq-beanstalkd -P N`` binds as fast as one process: nothing of the Queue's,
    nor json or subprocess, is imported before ``Group`` has bound the port."""
    code = ("import sys; from sqlq.server.processes import Group; "
            "print(' '.join(sorted(m for m in sys.modules if m.startswith("
            "('sqlq.queue', 'sqlq.backends', 'apsw', 'psycopg', 'json', 'subprocess')))))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert out.returncode == 0 and out.stdout.split() == [], out.stdout + out.stderr


def _connects(address: object) -> bool:
    family = socket.AF_UNIX if isinstance(address, str) else socket.AF_INET
    with socket.socket(family) as s:
        try:
            s.connect(address)  # type: ignore[arg-type]
            return True
        except OSError:
            return False
