"""The beanstalkd-protocol server over real sockets: raw bytes and the greenstalk client."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import apsw
import greenstalk
import pytest

import sqlq
from sqlq.server import waiters as waiters_module
from tests import forkserver
from tests.conftest import ROOT
from tests.servers import BeanstalkdProcess, Raw, Running, free_port
from tests.timing import soon
from tests.workers import wait_for


@pytest.fixture
def raw(srv: Running) -> Iterator[Raw]:
    client = Raw(srv.address)
    yield client
    client.close()


def stats(client: Raw, line: bytes = b"stats") -> dict[str, str]:
    body = client.cmd(line).split(b"\r\n", 1)[1]
    assert body.startswith(b"---\n") and body.endswith(b"\n\r\n")
    pairs = (row.split(": ", 1) for row in body[4:-2].decode().splitlines())
    return {k: v for k, v in pairs}


# ---- every command, byte for byte ------------------------------------------------------------


def test_producer_and_worker_commands(raw: Raw) -> None:
    assert raw.cmd(b"use jobs") == b"USING jobs\r\n"
    assert raw.cmd(b"list-tube-used") == b"USING jobs\r\n"
    raw.send(b"put 10 0 60 5\r\nhello\r\n")
    assert raw.reply() == b"INSERTED 1\r\n"
    assert raw.cmd(b"peek 1") == b"FOUND 1 5\r\nhello\r\n"
    assert raw.cmd(b"peek-ready") == b"FOUND 1 5\r\nhello\r\n"
    assert raw.cmd(b"watch jobs") == b"WATCHING 2\r\n"
    assert raw.cmd(b"ignore default") == b"WATCHING 1\r\n"
    assert raw.cmd(b"list-tubes-watched") == b"OK 11\r\n---\n- jobs\n\r\n"
    assert raw.cmd(b"reserve") == b"RESERVED 1 5\r\nhello\r\n"
    assert raw.cmd(b"touch 1") == b"TOUCHED\r\n"
    assert raw.cmd(b"release 1 5 0") == b"RELEASED\r\n"
    assert raw.cmd(b"reserve-with-timeout 0") == b"RESERVED 1 5\r\nhello\r\n"
    assert raw.cmd(b"bury 1 7") == b"BURIED\r\n"
    assert raw.cmd(b"peek-buried") == b"FOUND 1 5\r\nhello\r\n"
    assert raw.cmd(b"kick 10") == b"KICKED 1\r\n"
    assert raw.cmd(b"reserve-job 1") == b"RESERVED 1 5\r\nhello\r\n"
    assert raw.cmd(b"release 1 7 100") == b"RELEASED\r\n"
    assert raw.cmd(b"peek-delayed") == b"FOUND 1 5\r\nhello\r\n"
    assert raw.cmd(b"kick-job 1") == b"KICKED\r\n"
    job = stats(raw, b"stats-job 1")
    assert job == {
        "id": "1", "tube": "jobs", "state": "ready", "pri": "7", "age": "0", "delay": "100",
        "ttr": "60", "time-left": "0", "file": "0", "reserves": "3", "timeouts": "0",
        "releases": "2", "buries": "1", "kicks": "2",
    }
    assert raw.cmd(b"delete 1") == b"DELETED\r\n"
    assert raw.cmd(b"peek 1") == b"NOT_FOUND\r\n"
    assert raw.cmd(b"list-tubes") == b"OK 21\r\n---\n- default\n- jobs\n\r\n"
    assert raw.cmd(b"pause-tube jobs 0") == b"PAUSED\r\n"
    tube = stats(raw, b"stats-tube jobs")
    assert (tube["name"], tube["total-jobs"], tube["cmd-delete"], tube["cmd-pause-tube"]) == (
        "jobs", "1", "1", "1")
    assert (tube["current-using"], tube["current-watching"]) == ("1", "1")
    raw.send(b"quit\r\n")
    assert raw.closed_by_server()


def test_fresh_server_counts_from_zero(raw: Raw) -> None:
    s = stats(raw)
    assert s["cmd-stats"] == "1"
    assert all(v == "0" for k, v in s.items() if k.startswith("cmd-") and k != "cmd-stats")
    assert (s["total-jobs"], s["current-connections"], s["total-connections"]) == ("0", "1", "1")
    assert (s["current-tubes"], s["draining"], s["uptime"], s["max-job-size"]) == (
        "1", "false", "0", "65535")
    assert s["version"] == '"1.12"'  # as beanstalkd 1.12 writes it: clients parse it
    assert not [k for k in s if k.startswith("sqlq-")]  # beanstalkd's keys only
    assert list(s)[:2] == ["current-jobs-urgent", "current-jobs-ready"]


def test_pipelined_commands_in_one_write(raw: Raw) -> None:
    raw.send(b"use a\r\nput 0 0 1 1\r\nx\r\nput 0 0 1 0\r\n\r\nlist-tube-used\r\nstats-job 2\r\n")
    assert [raw.reply() for _ in range(4)][:4] == [
        b"USING a\r\n", b"INSERTED 1\r\n", b"INSERTED 2\r\n", b"USING a\r\n"]
    assert raw.reply().startswith(b"OK ")


# ---- every error reply ------------------------------------------------------------------------


def test_bad_format_and_unknown_command(raw: Raw) -> None:
    for line in (b"put 1 2", b"put 1 2 3", b"peek x", b"reservex", b"use -x", b"stats x",
                 b"release 1", b"bury 1", b"kick x", b"reserve-with-timeout -1",
                 b"use " + b"a" * 201):
        assert raw.cmd(line) == b"BAD_FORMAT\r\n", line
    for line in (b"", b"PUT 0 0 1 1", b"peek", b"delete", b"hello"):
        assert raw.cmd(line) == b"UNKNOWN_COMMAND\r\n", line
    raw.send(b"use " + b"a" * 300 + b"\r\n")  # longer than beanstalkd's 224-byte line
    assert raw.reply() == b"BAD_FORMAT\r\n"
    raw.send(b"x" * 100_000 + b"\r\n")
    assert raw.reply() == b"BAD_FORMAT\r\n"
    assert raw.cmd(b"list-tube-used") == b"USING default\r\n"


def test_expected_crlf_and_job_too_big(raw: Raw) -> None:
    raw.send(b"put 0 0 1 3\r\nabcXY")
    assert raw.reply() == b"EXPECTED_CRLF\r\n"
    raw.send(b"put 0 0 1 65536\r\n" + b"z" * 65536 + b"\r\n")
    assert raw.reply() == b"JOB_TOO_BIG\r\n"
    raw.send(b"put 0 0 1 65535\r\n" + b"z" * 65535 + b"\r\n")
    assert raw.reply() == b"INSERTED 1\r\n"
    assert stats(raw)["cmd-put"] == "3"


def test_not_found_replies(raw: Raw) -> None:
    for line in (b"peek 9", b"delete 9", b"release 9 0 0", b"bury 9 0", b"touch 9",
                 b"kick-job 9", b"stats-job 9", b"reserve-job 9", b"peek-ready",
                 b"peek-delayed", b"peek-buried", b"stats-tube nope", b"pause-tube nope 1",
                 b"peek 18446744073709551615", b"delete 9223372036854775808"):
        assert raw.cmd(line) == b"NOT_FOUND\r\n", line
    for verb in (b"peek", b"delete", b"touch", b"kick-job", b"stats-job", b"reserve-job"):
        line = verb + b" 9223372036854775808"  # past SQLite's integers: the Queue's check
        assert raw.cmd(line) == b"NOT_FOUND\r\n", line
    raw.send(b"put 0 0 1 1\r\nx\r\n")
    assert raw.reply() == b"INSERTED 1\r\n"
    for line in (b"release 1 0 0", b"bury 1 0", b"touch 1", b"kick-job 1"):
        assert raw.cmd(line) == b"NOT_FOUND\r\n", line  # not reserved by this client


def test_not_ignored(raw: Raw) -> None:
    assert raw.cmd(b"ignore default") == b"NOT_IGNORED\r\n"
    assert raw.cmd(b"ignore other") == b"WATCHING 1\r\n"


def test_timed_out(raw: Raw) -> None:
    assert raw.cmd(b"reserve-with-timeout 0") == b"TIMED_OUT\r\n"
    start = time.monotonic()
    assert raw.cmd(b"reserve-with-timeout 1") == b"TIMED_OUT\r\n"
    assert 0.99 <= time.monotonic() - start < soon(1)


def test_deadline_soon(raw: Raw) -> None:
    raw.send(b"put 0 0 1 1\r\nx\r\n")
    assert raw.reply() == b"INSERTED 1\r\n"
    assert raw.cmd(b"reserve") == b"RESERVED 1 1\r\nx\r\n"
    assert raw.cmd(b"reserve") == b"DEADLINE_SOON\r\n"  # a 1 s TTR is all safety margin
    raw.send(b"put 0 0 2 1\r\ny\r\n")
    assert raw.reply() == b"INSERTED 2\r\n"
    assert raw.cmd(b"delete 1") == b"DELETED\r\n"
    assert raw.cmd(b"reserve") == b"RESERVED 2 1\r\ny\r\n"
    start = time.monotonic()
    assert raw.cmd(b"reserve") == b"DEADLINE_SOON\r\n"  # when the last second begins
    assert 0.9 <= time.monotonic() - start < soon(1)


def test_no_deadline_soon_for_a_job_an_administrator_took_away(srv: Running, raw: Raw) -> None:
    raw.send(b"put 0 0 1 1\r\nx\r\n")
    assert raw.reply() == b"INSERTED 1\r\n"
    assert raw.cmd(b"reserve") == b"RESERVED 1 1\r\nx\r\n"
    with sqlq.Queue(srv.path) as admin:
        admin.delete(1)  # as `sqlq delete 1` would, from another process
    assert raw.cmd(b"reserve-with-timeout 0") == b"TIMED_OUT\r\n"


def test_draining(srv: Running, raw: Raw) -> None:
    srv.server.drain()
    raw.send(b"put 0 0 1 1\r\nx\r\n")
    assert raw.reply() == b"DRAINING\r\n"
    assert stats(raw)["draining"] == "true"


def test_internal_errors_do_not_take_the_server_down(srv: Running, raw: Raw,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(*args: object, **kwargs: object) -> None:
        raise sqlq.DatabaseError("disk on fire")

    monkeypatch.setattr(srv.queue, "peek", broken)
    assert raw.cmd(b"peek 1") == b"INTERNAL_ERROR\r\n"
    monkeypatch.setattr(srv.server.waiters, "deadline_soon", broken)
    raw.send(b"reserve\r\n")  # a bug outside any command: that client is dropped
    assert raw.closed_by_server()
    monkeypatch.undo()
    with greenstalk.Client(srv.address) as c:
        assert c.using() == "default"


# ---- blocking, concurrency, disconnects ---------------------------------------------------------


def test_reserve_blocks_only_its_own_connection(srv: Running) -> None:
    waiter, other = Raw(srv.address), Raw(srv.address)
    waiter.send(b"reserve\r\n")
    time.sleep(0.1)
    assert other.cmd(b"list-tube-used") == b"USING default\r\n"
    assert stats(other)["current-waiting"] == "1"
    start = time.monotonic()
    other.send(b"put 0 0 10 2\r\nhi\r\n")
    assert other.reply() == b"INSERTED 1\r\n"
    assert waiter.reply() == b"RESERVED 1 2\r\nhi\r\n"
    assert time.monotonic() - start < soon()
    waiter.close()
    other.close()


def test_closed_connection_releases_its_jobs_at_once(srv: Running) -> None:
    holder, other = Raw(srv.address), Raw(srv.address)
    holder.send(b"put 0 0 60 1\r\nx\r\n")
    assert holder.reply() == b"INSERTED 1\r\n"
    assert holder.cmd(b"reserve") == b"RESERVED 1 1\r\nx\r\n"
    other.send(b"reserve-with-timeout 5\r\n")
    time.sleep(0.05)
    start = time.monotonic()
    holder.close()
    assert other.reply() == b"RESERVED 1 1\r\nx\r\n"
    assert time.monotonic() - start < soon()
    other.close()


def test_half_closed_waiter_times_out(srv: Running) -> None:
    client = Raw(srv.address)
    client.send(b"reserve\r\n")
    time.sleep(0.05)
    client.sock.shutdown(socket.SHUT_WR)
    assert client.reply() == b"TIMED_OUT\r\n"
    assert client.closed_by_server()


def test_delete_of_a_job_reserved_by_another_client(srv: Running) -> None:
    with greenstalk.Client(srv.address) as a, greenstalk.Client(srv.address) as b:
        a.put("x")
        job = b.reserve()
        with pytest.raises(greenstalk.NotFoundError):
            a.delete(job)
        with pytest.raises(greenstalk.NotFoundError):
            a.reserve_job(job.id)
        b.delete(job)


def test_ttr_expiry_gives_the_job_to_another_client(srv: Running) -> None:
    with greenstalk.Client(srv.address) as a, greenstalk.Client(srv.address) as b:
        a.put("x", ttr=1)
        start = time.monotonic()  # before the reserve: the TTR counts from the server's clock
        job = a.reserve()
        assert b.reserve(timeout=3).id == job.id
        assert 0.9 <= time.monotonic() - start < soon(1)
        assert b.stats_job(job.id)["timeouts"] == 1
        with pytest.raises(greenstalk.NotFoundError):
            a.release(job)  # its lease is gone
        b.delete(job)


def test_delays_and_pauses_are_timed(srv: Running) -> None:
    with greenstalk.Client(srv.address) as c:
        start = time.monotonic()
        c.put("later", delay=1)
        assert c.peek_delayed().body == "later"
        assert c.reserve(timeout=3).body == "later"
        assert 0.99 <= time.monotonic() - start < soon(1)
        c.release(c.peek(1), delay=0)
        start = time.monotonic()
        c.pause_tube("default", 1)
        assert c.reserve(timeout=3).body == "later"
        assert 0.99 <= time.monotonic() - start < soon(1)


def test_greenstalk_round_trip_and_stats(srv: Running) -> None:
    with greenstalk.Client(srv.address, use="emails", watch=["emails", "sms"]) as c:
        ids = [c.put(f"job {i}", priority=100 - i) for i in range(3)]
        assert [c.reserve(timeout=0).id for _ in ids] == ids[::-1]
        assert c.stats_tube("emails")["current-jobs-reserved"] == 3
        assert c.stats_tube("sms")["current-watching"] == 1
        assert set(c.tubes()) == {"default", "emails", "sms"}
        assert c.stats()["current-jobs-reserved"] == 3
        assert c.stats()["current-workers"] == 1


def test_slow_client_does_not_stall_others(srv: Running) -> None:
    slow, fast = Raw(srv.address), Raw(srv.address)
    body = b"b" * 60_000
    slow.send(b"put 0 0 60 %d\r\n%s\r\n" % (len(body), body))
    assert slow.reply() == b"INSERTED 1\r\n"
    slow.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    slow.send(b"peek 1\r\n" * 200)  # 12 MB of replies it never reads
    time.sleep(0.2)
    start = time.monotonic()
    for _ in range(20):
        assert fast.cmd(b"list-tube-used") == b"USING default\r\n"
    assert time.monotonic() - start < soon()
    slow.close()
    assert fast.cmd(b"peek 1").startswith(b"FOUND 1 60000\r\n")
    fast.close()


def test_hundreds_of_idle_connections_cost_nothing(srv: Running) -> None:
    clients = [socket.create_connection(srv.address) for _ in range(300)]
    time.sleep(0.2)
    cpu = time.process_time()
    time.sleep(1.0)
    assert time.process_time() - cpu < 0.05  # this process includes the server's thread
    with greenstalk.Client(srv.address) as c:
        assert c.stats()["current-connections"] == 301
    for sock in clients:
        sock.close()


def test_a_waiting_reserve_costs_no_cpu(srv: Running) -> None:
    waiters = [Raw(srv.address) for _ in range(20)]
    for i, w in enumerate(waiters):
        w.send(b"watch t%d\r\nreserve\r\n" % (i % 3))
    time.sleep(0.2)
    cpu = time.process_time()
    time.sleep(1.0)
    assert time.process_time() - cpu < 0.05
    for w in waiters:
        w.close()


# ---- library users in other processes -----------------------------------------------------------

_LIBRARY_USER = """
import sys, sqlq
with sqlq.Queue(sys.argv[1], durability="normal") as q:
    q.put(b"from the library", tube="shared")
    job = q.reserve("back", timeout=10)
    print(job.body.decode(), flush=True)
    job.delete()
    held = q.reserve("held", timeout=10)
    print(held.id, flush=True)
    sys.stdin.readline()
"""


def test_interop_with_library_users_in_another_process(srv: Running) -> None:
    with greenstalk.Client(srv.address, use="held", watch="shared") as c:
        held_id = c.put("to be held by the library")
        user = forkserver.Popen(
            [sys.executable, "-c", _LIBRARY_USER, srv.path], stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, text=True, cwd=ROOT)
        try:
            job = c.reserve(timeout=10)
            assert job.body == "from the library"
            c.delete(job)
            c.use("back")
            c.put("from the server")
            assert user.stdout is not None
            assert user.stdout.readline() == "from the server\n"
            assert user.stdout.readline() == f"{held_id}\n"
            with pytest.raises(greenstalk.NotFoundError):
                c.delete(held_id)  # reserved by someone else
            assert c.stats_job(held_id)["state"] == "reserved"
        finally:
            user.kill()  # SIGKILL: its reservation comes back without waiting for the TTR
            user.wait()
        c.watch("held")
        assert c.reserve(timeout=5).id == held_id


def test_the_notifier_is_open_only_around_waits(srv: Running,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """Every write queues inotify events while it is open: a server whose reserves find
    jobs never opens it, and one closes it once nobody has waited for NOTIFIER_LINGER;
    a waiter after that still wakes on another connection's commit."""
    monkeypatch.setattr(waiters_module, "NOTIFIER_LINGER", 0.05)
    waiters = srv.server.waiters
    with greenstalk.Client(srv.address) as c, sqlq.Queue(srv.path, durability="normal") as q:
        c.put("ready")
        c.delete(c.reserve(timeout=5))
        assert waiters._notifier is None  # found a job at once: nothing to watch
        for round_ in range(2):
            threading.Timer(0.2, q.put, [f"from the library {round_}"]).start()
            job = c.reserve(timeout=5)  # waits: watching
            assert job.body == f"from the library {round_}"
            c.delete(job)
            deadline = time.monotonic() + 5
            while waiters._notifier is not None and time.monotonic() < deadline:
                time.sleep(0.01)
            assert waiters._notifier is None  # nobody waited for the linger: closed


_LIBRARY_WORKER = """
import sys, sqlq
seen = []
with sqlq.Queue(sys.argv[1], durability="normal") as q:
    print("ready", flush=True)
    while (job := q.reserve("mixed", timeout=1)) is not None:
        seen.append(job.body.decode())
        job.delete()
print(" ".join(seen), flush=True)
"""


@pytest.mark.slow
def test_protocol_clients_and_library_workers_share_a_tube_without_doubles(
        srv: Running) -> None:
    library = forkserver.Popen([sys.executable, "-c", _LIBRARY_WORKER, srv.path],
                               stdout=subprocess.PIPE, text=True, cwd=ROOT)
    assert library.stdout is not None and library.stdout.readline() == "ready\n"
    seen: list[list[str]] = []

    def protocol_worker() -> None:
        mine: list[str] = []
        with greenstalk.Client(srv.address, watch="mixed") as c:
            while True:
                try:
                    job = c.reserve(timeout=1)
                except greenstalk.TimedOutError:
                    break
                mine.append(job.body)
                c.delete(job)
        seen.append(mine)

    workers = [threading.Thread(target=protocol_worker) for _ in range(3)]
    with greenstalk.Client(srv.address, use="mixed") as producer:
        # The library worker takes some alone first: once protocol workers wait, a put
        # and their claim of it may share a commit (group commit), and then another
        # process never sees the job ready at all.
        for i in range(10):
            producer.put(str(i))
        wait_for(lambda: srv.queue.stats_tube("mixed")["current-jobs-ready"] < 10)
        for w in workers:
            w.start()
        for i in range(10, 300):
            producer.put(str(i))
    for w in workers:
        w.join(30)
    out, _ = library.communicate(timeout=30)
    by_library, by_protocol = out.split(), [b for mine in seen for b in mine]
    assert sorted(by_library + by_protocol, key=int) == [str(i) for i in range(300)]
    assert by_library and by_protocol  # both sides took part; no job went to two of them


# ---- the drop-in binary -----------------------------------------------------------------------


def _start(args: list[str], address: object) -> subprocess.Popen[bytes]:
    proc = forkserver.Popen([sys.executable, "-m", "sqlq.server", *args], cwd=ROOT)
    for _ in range(500):
        try:
            family = socket.AF_UNIX if isinstance(address, str) else socket.AF_INET
            with socket.socket(family) as s:
                s.connect(address)  # type: ignore[arg-type]
                return proc
        except OSError:
            time.sleep(0.01)
    proc.kill()
    raise AssertionError("sqlq-beanstalkd did not start")


def test_beanstalkd_flags_binlog_dir_and_first_job_id(tmp_path: Path) -> None:
    port = free_port()
    proc = _start(["-l", "127.0.0.1", "-p", str(port), "-b", str(tmp_path), "-z", "10", "-f0"],
                  ("127.0.0.1", port))
    try:
        with greenstalk.Client(("127.0.0.1", port), encoding=None) as c:
            assert c.put(b"0123456789") == 1
            with pytest.raises(greenstalk.JobTooBigError):
                c.put(b"01234567890")
            assert c.stats()["max-job-size"] == 10
        with apsw.Connection(str(tmp_path / "sqlq.db"), flags=apsw.SQLITE_OPEN_READONLY) as db:
            assert db.execute("SELECT count(*) FROM sqlq_jobs").fetchone()[0] == 1
    finally:
        proc.terminate()
        assert proc.wait(10) == 0


def test_beanstalkd_unix_socket_temp_dir_and_drain_on_sigusr1(tmp_path: Path) -> None:
    path = str(tmp_path / "bs.sock")
    proc = _start(["-l", f"unix:{path}"], path)
    try:
        with greenstalk.Client(path) as c:
            assert c.put("first") == 1
            proc.send_signal(signal.SIGUSR1)
            time.sleep(0.2)
            with pytest.raises(greenstalk.DrainingError):
                c.put("second")
            assert c.stats()["draining"] == "true"
    finally:
        proc.terminate()
        assert proc.wait(10) == 0
    assert not os.path.exists(path)


def test_commands_sent_while_the_file_opens_are_timed_from_their_arrival() -> None:
    """It listens before its file is open; a client that connects at once sees exact timers."""
    port = free_port()
    proc = forkserver.Popen([sys.executable, "-m", "sqlq.server", "-l", "127.0.0.1", "-p",
                             str(port)], cwd=ROOT)
    try:
        for _ in range(500):
            try:
                client = Raw(("127.0.0.1", port))
                break
            except OSError:
                time.sleep(0.002)
        start = time.monotonic()
        client.send(b"reserve-with-timeout 1\r\n")
        assert client.reply() == b"TIMED_OUT\r\n"
        assert 0.99 <= time.monotonic() - start < soon(1)
        client.close()
    finally:
        proc.terminate()
        assert proc.wait(10) == 0


@pytest.mark.skipif(not os.path.exists("/proc/self/stat"), reason="measures CPU in /proc")
def test_out_of_file_descriptors_pauses_accepting_instead_of_spinning() -> None:
    import resource

    port = free_port()

    def few_fds() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (48, 48))

    proc = forkserver.Popen([sys.executable, "-m", "sqlq.server", "-l", "127.0.0.1", "-p",
                             str(port)], cwd=ROOT, preexec_fn=few_fds, stderr=subprocess.PIPE)
    try:
        first = None
        for _ in range(500):
            try:
                first = Raw(("127.0.0.1", port))
                break
            except OSError:
                time.sleep(0.01)
        assert first is not None and first.cmd(b"list-tube-used") == b"USING default\r\n"
        clients = [socket.create_connection(("127.0.0.1", port)) for _ in range(60)]
        time.sleep(0.3)
        with open(f"/proc/{proc.pid}/stat") as f:
            before = sum(int(x) for x in f.read().split(")")[1].split()[11:13])
        time.sleep(1.0)
        with open(f"/proc/{proc.pid}/stat") as f:
            after = sum(int(x) for x in f.read().split(")")[1].split()[11:13])
        assert (after - before) / os.sysconf("SC_CLK_TCK") < 0.3  # not spinning on accept
        for sock in clients:
            sock.close()
        assert first.cmd(b"list-tube-used") == b"USING default\r\n"
        with greenstalk.Client(("127.0.0.1", port)) as late:
            assert late.using() == "default"
    finally:
        proc.terminate()
        proc.wait(10)
        assert proc.stderr is not None
        assert b"pausing accepts" in proc.stderr.read()


def test_beanstalkd_help_version_and_bad_flags() -> None:
    run = [sys.executable, "-m", "sqlq.server"]
    out = forkserver.run([*run, "-h"], capture_output=True, text=True, cwd=ROOT)
    assert out.returncode == 0 and "no authentication" in out.stdout
    out = forkserver.run([*run, "-v"], capture_output=True, text=True, cwd=ROOT)
    assert out.stdout.startswith("beanstalkd 1.12")
    out = forkserver.run([*run, "-x"], capture_output=True, text=True, cwd=ROOT)
    assert out.returncode == 5 and "unknown flag" in out.stderr


def test_server_module_does_not_import_the_queue_before_it_listens() -> None:
    """sqlq-beanstalkd binds first: clients (and greenstalk's suite) connect 100 ms after exec."""
    code = ("import sys, sqlq.server; "
            "print(' '.join(sorted(m for m in sys.modules if m.startswith(('sqlq', 'apsw')))))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    loaded = out.stdout.split()
    assert "sqlq.server.main" in loaded, out.stderr
    # The package root, the errors, the logger helper (logging itself on first use; its
    # package, sqlq.core, is a docstring) and the server package (its wire format
    # included): no Queue, no apsw.
    assert [m for m in loaded if m not in ("sqlq", "sqlq.errors", "sqlq.core", "sqlq.core.logger",
                                          "sqlq.server", "sqlq.version")
            and not m.startswith("sqlq.server.")] == []


# ---- another process holds the write lock (reliability N1) -----------------------------------

HOLD_LOCK = """
import sys, apsw
conn = apsw.Connection(sys.argv[1])
conn.execute("BEGIN IMMEDIATE")
print("locked", flush=True)
sys.stdin.readline()
conn.execute("COMMIT")
"""


def _quick(client: Raw, line: bytes) -> bytes:
    """Send one command; its reply, which must come soon (tests/timing.py), not once
    the lock is released."""
    started = time.monotonic()
    reply = client.cmd(line)
    took = time.monotonic() - started
    assert took < soon(), f"{line!r} took {took:.2f}s while another process held the lock"
    return reply


def test_a_write_lock_held_elsewhere_stalls_only_the_writes_that_need_it(
        tmp_path: Path) -> None:
    """Reads, in-memory commands and other connections are served while another process
    holds the write lock; a put waits for it, and its connection's next commands wait
    behind it in order; a waiting reserve gets its job once the lock is free."""
    server = BeanstalkdProcess(tmp_path, "-F")
    address = ("127.0.0.1", server.port)
    writer, reader, worker = Raw(address), Raw(address), Raw(address)
    holder = None
    try:
        assert writer.cmd(b"put 0 0 60 5\r\nfirst") == b"INSERTED 1\r\n"
        holder = forkserver.Popen([sys.executable, "-c", HOLD_LOCK, str(server.db)],
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        assert holder.stdout is not None and holder.stdin is not None
        assert holder.stdout.readline() == b"locked\n"
        writer.send(b"put 0 0 60 6\r\nsecond\r\nlist-tube-used\r\nput 0 0 60 5\r\nthird\r\n")
        worker.send(b"watch other\r\nreserve-with-timeout 60\r\n")
        for _ in range(3):  # the whole time the lock is held, not only at first
            assert _quick(reader, b"list-tube-used") == b"USING default\r\n"
            assert _quick(reader, b"use other") == b"USING other\r\n"
            assert _quick(reader, b"use default") == b"USING default\r\n"
            assert _quick(reader, b"peek-ready").startswith(b"FOUND 1 5\r\nfirst")
            assert _quick(reader, b"stats").startswith(b"OK ")
            assert _quick(reader, b"stats-job 1").startswith(b"OK ")
            assert _quick(reader, b"list-tubes-watched").startswith(b"OK ")
        assert worker.line() == b"WATCHING 2\r\n"
        writer.sock.settimeout(0.2)
        with pytest.raises(TimeoutError):
            writer.line()  # the put waits for the lock
        writer.sock.settimeout(30)
        holder.stdin.write(b"go\n")
        holder.stdin.flush()
        assert holder.wait(30) == 0
        assert writer.line() == b"INSERTED 2\r\n"
        assert writer.line() == b"USING default\r\n"
        assert writer.line() == b"INSERTED 3\r\n"
        assert worker.reply() == b"RESERVED 1 5\r\nfirst\r\n"
        assert reader.cmd(b"peek 3") == b"FOUND 3 5\r\nthird\r\n"
        assert server.alive()
    finally:
        if holder is not None and holder.poll() is None:
            holder.kill()
            holder.wait()
        for client in (writer, reader, worker):
            client.close()
        server.stop()


def test_big_bodies_take_turns_for_the_budget_and_all_complete(tmp_path: Path) -> None:
    """Bodies over one read wait for memory in arrival order (server/budget.py); one
    larger than the whole budget still goes through when nothing else holds memory; one
    that comes whole within a client's usual reads needs no turn."""
    srv = Running(str(tmp_path / "q.db"), max_job_size=1 << 20, max_buffered=300_000)
    clients = [Raw(srv.address) for _ in range(5)]
    try:
        sizes = [200_000, 200_000, 500_000, 100_000, 70_000]
        bodies = [os.urandom(n) for n in sizes]
        for client, body in zip(clients[:4], bodies, strict=False):
            client.send(b"put 0 0 60 %d\r\n" % len(body) + body[:-10])
        budget = srv.server.budget
        wait_for(lambda: budget.granted > 0 and len(budget.waiting) == 3,
                 what="one body granted, three waiting their turn")
        clients[4].send(b"put 0 0 60 70000\r\n" + bodies[4] + b"\r\n")
        assert clients[4].line().startswith(b"INSERTED ")  # while the others wait
        assert len(budget.waiting) == 3  # it left the line
        for client, body in zip(clients[:4], bodies, strict=False):
            client.send(body[-10:] + b"\r\n")
        ids = [int(client.line().split()[1]) for client in clients[:4]]
        assert [srv.queue.peek(i).body for i in ids] == bodies[:4]  # type: ignore[union-attr]
        wait_for(lambda: budget.granted == 0 and not budget.waiting,
                 what="every grant given back")  # just after each reply was sent
    finally:
        for client in clients:
            client.close()
        srv.stop()


def test_puts_waiting_for_the_write_lock_keep_their_bodies_within_the_budget(
        tmp_path: Path) -> None:
    """A put parked for another connection's lock still holds its grant: bodies behind
    it wait unread, so a long transaction elsewhere cannot make the server buffer more."""
    path = str(tmp_path / "q.db")
    srv = Running(path, max_job_size=1 << 20, max_buffered=300_000)
    clients = [Raw(srv.address) for _ in range(3)]
    bodies = [os.urandom(200_000) for _ in clients]
    budget = srv.server.budget
    try:
        with sqlq.Queue(path) as other:
            with other.transaction():
                for client, body in zip(clients, bodies, strict=True):
                    client.send(b"put 0 0 60 %d\r\n" % len(body) + body + b"\r\n")
                wait_for(lambda: srv.server.locks.parked and len(budget.waiting) == 2,
                         what="one put parked for the lock, two bodies waiting for memory")
                assert budget.granted == 200_002
            ids = [int(client.line().split()[1]) for client in clients]
        assert [srv.queue.peek(i).body for i in ids] == bodies  # type: ignore[union-attr]
    finally:
        for client in clients:
            client.close()
        srv.stop()


def test_verbs_on_held_jobs_wait_out_the_lock_and_keep_the_job_held(tmp_path: Path) -> None:
    """A delete, release, bury or touch refused by the lock runs again later: the
    connection must still hold its job then (handlers change nothing before writing)."""
    path = str(tmp_path / "q.db")
    srv = Running(path)
    client = Raw(srv.address)
    try:
        for n in range(4):
            client.send(b"put 0 0 60 1\r\n%d\r\n" % n)
            assert client.line() == b"INSERTED %d\r\n" % (n + 1)
        for n in range(4):
            assert client.cmd(b"reserve").startswith(b"RESERVED %d " % (n + 1))
        with sqlq.Queue(path) as other, other.transaction():
            client.send(b"touch 1\r\ndelete 2\r\nrelease 3 5 0\r\nbury 4 7\r\n")
            wait_for(lambda: srv.server.locks.parked, what="the touch to wait for the lock")
        assert [client.line() for _ in range(4)] == [
            b"TOUCHED\r\n", b"DELETED\r\n", b"RELEASED\r\n", b"BURIED\r\n"]
        assert srv.queue.peek(2) is None
        assert [srv.queue.peek(i).state for i in (1, 3, 4)] == [  # type: ignore[union-attr]
            "reserved", "ready", "buried"]
    finally:
        client.close()
        srv.stop()
