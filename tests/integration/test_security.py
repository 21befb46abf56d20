"""Security basics: private files, no pickle, bound SQL, a server that keeps its head.

* The database, its -wal and -shm files, the owners directory and its files are
  created for their owner only (0600 / 0700), even under ``umask 000``.
* No module of sqlq imports pickle or any other deserialiser of code.
* Every SQL parameter is bound (tests/sqlscan.py states the rule and checks it).
* The beanstalkd server binds loopback unless told otherwise, and survives
  clients that trickle a byte at a time (slowloris), send a line that never
  ends, or never read their replies: other clients are served meanwhile and
  the server's memory stays bounded.
"""

from __future__ import annotations

import ast
import contextlib
import os
import shutil
import socket
import stat
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

import sqlq
from sqlq.cli import cli as cli_group
from sqlq.server.flags import parse_flags
from sqlq.server.net import bind
from tests import forkserver, sqlscan
from tests.servers import BeanstalkdProcess, rss_kib
from tests.timing import soon

PACKAGE = Path(sqlq.__file__).parent
ROOT = PACKAGE.parent


def mode(path: str | Path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


@contextlib.contextmanager
def umask(value: int) -> Iterator[None]:
    old = os.umask(value)
    try:
        yield
    finally:
        os.umask(old)


# -- file permissions --------------------------------------------------------------------------

def test_files_are_private_even_under_umask_000(tmp_path: Path) -> None:
    path = tmp_path / "q.db"
    with umask(0), sqlq.Queue(str(path)) as q:
        q.put(b"secret")
        job = q.reserve(timeout=0)  # registers an owner: the <db>-sqlq directory and a file
        assert job is not None
        owners = Path(f"{path}-sqlq")
        assert mode(path) == 0o600
        assert mode(f"{path}-wal") == 0o600
        assert mode(f"{path}-shm") == 0o600
        assert mode(owners) == 0o700
        files = list(owners.iterdir())
        assert files and all(mode(f) == 0o600 for f in files)
    leftovers = [p.name for p in tmp_path.iterdir() if "sqlq-init" in p.name]
    assert not leftovers, leftovers


def test_files_made_by_the_command_line_are_private(tmp_path: Path) -> None:
    path = tmp_path / "cli.db"
    forkserver.run([str(Path(sys.executable).parent / "sqlq"), "--db", str(path), "put", "x"],
                   check=True, capture_output=True, preexec_fn=lambda: os.umask(0))
    assert mode(path) == 0o600


@pytest.mark.parametrize("command", [["-m", "sqlq.server", "-l"],
                                     ["-m", "sqlq", "serve", "--listen"]])
def test_a_unix_socket_is_private_even_under_umask_000(tmp_path: Path,
                                                       command: list[str]) -> None:
    """Reliability N2: connecting needs write permission on the socket, and the protocol
    has no authentication; under umask 000 the socket was 0777."""
    path = tmp_path / "bs.sock"
    proc = forkserver.Popen([sys.executable, *command, f"unix:{path}"], cwd=tmp_path,
                            preexec_fn=lambda: os.umask(0), stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 30
        while not path.exists():
            assert proc.poll() is None and time.monotonic() < deadline, "no socket"
            time.sleep(0.01)
        assert mode(path) == 0o600
    finally:
        proc.terminate()
        proc.wait(10)


def test_binding_a_unix_socket_leaves_the_umask_alone(tmp_path: Path) -> None:
    with umask(0o022):
        sock = bind(f"unix:{tmp_path / 'bs.sock'}")
        sock.close()
        assert os.umask(0o022) == 0o022
    assert mode(tmp_path / "bs.sock") == 0o600


# -- the sidecar directory: nobody else may write in it ----------------------------------------

NOBODY = 65534


def refused_sidecar(path: Path, match: str) -> str:
    """Opening path fails in one line that names the sidecar, and sqlq leaves it alone."""
    with pytest.raises(sqlq.DatabaseError, match=match) as info:
        sqlq.Queue(str(path))
    message = str(info.value)
    assert "\n" not in message and f"{path}-sqlq" in message, message
    result = forkserver.run([str(Path(sys.executable).parent / "sqlq"), "--db", str(path),
                             "put", "x"], capture_output=True, text=True)
    assert result.returncode == 1 and match.split()[0] in result.stderr, result.stderr
    return message


@pytest.mark.skipif(os.geteuid() != 0, reason="giving a directory to another user needs root")
def test_a_sidecar_made_by_another_user_is_refused(tmp_path: Path) -> None:
    """Another local user pre-creates <db>-sqlq in a shared directory: they could delete
    owner files or plant a notify symlink, so sqlq will not use it."""
    shared = tmp_path / "shared"
    shared.mkdir(mode=0o1777)
    planted = shared / "jobs.db-sqlq"
    planted.mkdir()
    os.chown(planted, NOBODY, NOBODY)
    os.chmod(planted, 0o777)
    refused_sidecar(shared / "jobs.db", "belongs to uid 65534")
    assert list(planted.iterdir()) == []  # nothing created in it


def test_a_sidecar_others_can_write_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "q.db"
    sqlq.Queue(str(path)).close()
    os.chmod(f"{path}-sqlq", 0o777)
    refused_sidecar(path, "writable by other users")
    os.chmod(f"{path}-sqlq", 0o750)  # group and others may look, not write: fine
    sqlq.Queue(str(path)).close()


def test_a_symlinked_sidecar_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "q.db"
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir(mode=0o700)
    Path(f"{path}-sqlq").symlink_to(elsewhere)
    refused_sidecar(path, "not a directory")
    assert list(elsewhere.iterdir()) == []


def test_a_planted_notify_symlink_is_not_followed(tmp_path: Path) -> None:
    """A notify symlink would make sqlq create, or write a byte into, any file it can."""
    path = tmp_path / "q.db"
    private = tmp_path / "private"
    private.mkdir(mode=0o700)
    sidecar = Path(f"{path}-sqlq")
    sidecar.mkdir(mode=0o700)
    (sidecar / "notify").symlink_to(private / "created-by-victim")
    refused_sidecar(path, "is a symlink")
    (sidecar / "notify").unlink()
    (private / "empty").touch()
    (sidecar / "notify").symlink_to(private / "empty")
    refused_sidecar(path, "is a symlink")
    assert sorted(p.name for p in private.iterdir()) == ["empty"]
    assert (private / "empty").read_bytes() == b""


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root")
def test_root_hands_what_it_creates_to_the_databases_owner(tmp_path: Path) -> None:
    """As SQLite does with -wal and -shm: the owner's own processes can then use them."""
    path = tmp_path / "q.db"
    sqlq.Queue(str(path)).close()
    shutil.rmtree(f"{path}-sqlq")
    os.chown(path, NOBODY, NOBODY)
    with sqlq.Queue(str(path)) as q:
        q.put(b"x")
        assert q.reserve(timeout=0) is not None
        sidecar = Path(f"{path}-sqlq")
        assert sidecar.stat().st_uid == NOBODY
        assert {f.stat().st_uid for f in sidecar.iterdir()} == {NOBODY}
    sqlq.Queue(str(path)).close()  # a sidecar of the database's owner is trusted


# -- no pickle ---------------------------------------------------------------------------------

UNSAFE_MODULES = {"pickle", "cPickle", "_pickle", "pickletools", "shelve", "marshal", "dill",
                  "cloudpickle", "joblib", "jsonpickle"}


def unsafe_imports(source: str) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(source)):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            names = [node.module]
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) \
                and node.func.id == "__import__" and node.args \
                and isinstance(node.args[0], ast.Constant):
            names = [str(node.args[0].value)]
        found += [n for n in names if n.split(".")[0] in UNSAFE_MODULES]
    return found


def test_no_pickle_anywhere_in_sqlq() -> None:
    sources = sorted(PACKAGE.rglob("*.py"))
    assert len(sources) > 10
    offenders = {p.name: unsafe_imports(p.read_text()) for p in sources}
    assert not {k: v for k, v in offenders.items() if v}
    # Nor through importlib with a name in a string.
    for path in sources:
        for name in UNSAFE_MODULES:
            assert f'import_module("{name}' not in path.read_text(), path.name


def test_the_unsafe_import_check_works() -> None:
    assert unsafe_imports("import pickle") == ["pickle"]
    assert unsafe_imports("from pickle import loads") == ["pickle"]
    assert unsafe_imports("import os, marshal as m") == ["marshal"]
    assert unsafe_imports("x = __import__('cloudpickle')") == ["cloudpickle"]
    assert unsafe_imports("# no pickle here\nimport json") == []


# -- bound SQL ---------------------------------------------------------------------------------

def test_every_sql_parameter_is_bound() -> None:
    findings = sqlscan.scan_package(PACKAGE)
    assert not findings, "\n".join(map(str, findings))


@pytest.mark.parametrize("source", [
    'def f(conn, job_id):\n    conn.execute(f"DELETE FROM sqlq_jobs WHERE id = {job_id}")',
    'def f(conn, tube):\n    conn.execute("SELECT * FROM sqlq_jobs WHERE tube = \'%s\'" % tube)',
    'def f(conn, tube):\n    conn.execute("SELECT * FROM t WHERE tube = \'{}\'".format(tube))',
    'def f(conn, tube):\n    conn.execute("SELECT * FROM t WHERE tube = \'" + tube + "\'")',
    'def f(conn, x):\n    sql = f"UPDATE t SET a = {x}"\n    conn.execute(sql)',
    'def f(conn, n):\n    conn.execute(f"PRAGMA cache_size = {n}")',          # n: a parameter
    'def f(conn, name):\n    conn.execute(f"SAVEPOINT {name}")',               # not generated
    'def f(conn, q):\n    conn.execute(build(q))',
    'def f(conn, w):\n    conn.execute(Q["claim"] + f" WHERE {w}")',
    'def f(conn, t):\n    cond = f"tube = {t!r}"\n    return cond + " AND state = 0"',
    # psycopg's composition only quotes what goes through Identifier and Literal:
    'def f(conn, v):\n    conn.execute(sql.SQL(f"SET LOCAL lock_timeout = {v}"))',
    'def f(conn, v):\n    conn.execute(sql.SQL("SET LOCAL x = {}").format(sql.SQL(v)))',
    'def f(conn, v):\n    conn.execute(sql.SQL("; ").join(v))',
])
def test_the_sql_scan_catches_formatted_values(source: str) -> None:
    assert sqlscan.scan_source(source), source


@pytest.mark.parametrize("source", [
    'def f(conn, job_id):\n    conn.execute("DELETE FROM t WHERE id = ?", (job_id,))',
    'def f(conn, p):\n    conn.execute(Q["claim_job"], p)',
    'LIMIT = 64 * 1024\ndef f(conn):\n    conn.execute(f"PRAGMA journal_size_limit = {LIMIT}")',
    'def f(conn, full):\n    level = "FULL" if full else "NORMAL"\n'
    '    conn.execute(f"PRAGMA synchronous = {level}")',
    'import secrets\ndef f(conn):\n    name = f"sqlq_{secrets.token_hex(4)}"\n'
    '    conn.execute(f"SAVEPOINT {name}")\n    conn.execute(f"RELEASE {name}")',
    'def execute(self, sql, params=()):\n    return self._conn.execute(sql, params)',
    'def f(x):\n    raise ValueError(f"delete {x} failed: not found")',  # a message, not SQL
    'def f(conn, s):\n    conn.execute(sql.SQL("; ").join(sql.SQL("SET LOCAL {} = {}").format(\n'
    '        sql.Identifier(k), sql.Literal(v)) for k, v in s.items()))',
    'def f(self, conn, t):\n    conn.execute(self._store.Q["lock_owner"], {"token": t})',
])
def test_the_sql_scan_allows_bound_and_internal_sql(source: str) -> None:
    assert not sqlscan.scan_source(source), sqlscan.scan_source(source)


# -- the server --------------------------------------------------------------------------------

def test_the_server_binds_loopback_by_default() -> None:
    from sqlq import server

    assert server.DEFAULT_LISTEN.startswith("127.0.0.1:")
    serve_listen = next(p for p in cli_group.commands["serve"].params if p.name == "listen")
    assert str(serve_listen.default).startswith("127.0.0.1")
    flags = parse_flags(["-p", "0"])  # sqlq-beanstalkd with only a port
    sock = server.bind(flags.listen)
    try:
        assert sock.getsockname()[0] == "127.0.0.1"
    finally:
        sock.close()


@pytest.fixture
def beanstalkd(tmp_path: Path) -> Iterator[BeanstalkdProcess]:
    if not Path("/proc/self/status").exists():
        pytest.skip("needs /proc to measure the server's memory")
    server = BeanstalkdProcess(tmp_path)
    yield server
    server.stop()


def _recv_line(sock: socket.socket) -> bytes:
    data = b""
    while not data.endswith(b"\r\n"):
        chunk = sock.recv(4096)
        if not chunk:
            raise ConnectionError(f"closed after {data!r}")
        data += chunk
    return data


def round_trip(sock: socket.socket) -> float:
    """put, reserve, delete on a well-behaved connection; return how long it took."""
    start = time.monotonic()
    sock.sendall(b"put 0 0 60 5\r\nhello\r\n")
    assert _recv_line(sock).startswith(b"INSERTED ")
    sock.sendall(b"reserve-with-timeout 0\r\n")
    header = b""
    while header.count(b"\r\n") < 2:  # RESERVED <id> 5\r\nhello\r\n
        header += sock.recv(4096)
    assert header.startswith(b"RESERVED "), header
    job_id = header.split()[1]
    sock.sendall(b"delete " + job_id + b"\r\n")
    assert _recv_line(sock) == b"DELETED\r\n"
    return time.monotonic() - start


@pytest.mark.slow
def test_server_survives_slowloris(beanstalkd: BeanstalkdProcess) -> None:
    """Hundreds of connections trickling a byte at a time do not hold up an honest client."""
    good = beanstalkd.connect()
    round_trip(good)
    rss_before = rss_kib(beanstalkd.proc.pid)
    slow: list[socket.socket] = []
    for i in range(200):
        s = beanstalkd.connect()
        s.setblocking(False)
        slow.append(s)
        if i % 4 == 0:  # a quarter announce a body they will never finish
            s.send(b"put 0 0 60 60000\r\n")
    lines = [b"put 0 0 60 5", b"reserve", b"stats-tube default", b"list-tubes"]
    latencies = []
    deadline = time.monotonic() + 2.5
    step = 0
    while time.monotonic() < deadline:
        for n, s in enumerate(slow):
            text = lines[n % len(lines)]
            with contextlib.suppress(BlockingIOError):
                s.send(text[step % len(text):step % len(text) + 1] if n % 4 else b"x")
        step += 1
        latencies.append(round_trip(good))
        time.sleep(0.02)
    assert beanstalkd.alive()
    assert max(latencies) < 1.0, f"an honest client waited {max(latencies):.3f}s"
    assert rss_kib(beanstalkd.proc.pid) - rss_before < 50_000
    for s in slow:
        s.close()
    round_trip(good)
    good.close()


def test_server_survives_an_endless_line(beanstalkd: BeanstalkdProcess) -> None:
    """A line that never ends is discarded as it comes, not buffered; then BAD_FORMAT."""
    good = beanstalkd.connect()
    round_trip(good)
    rss_before = rss_kib(beanstalkd.proc.pid)
    flood = beanstalkd.connect(timeout=30)
    chunk = b"x" * 65536
    sent = 0
    while sent < 64 << 20:  # 64 MiB without a newline
        flood.sendall(chunk)
        sent += len(chunk)
        if sent % (8 << 20) == 0:
            assert round_trip(good) < 1.0
    assert beanstalkd.alive()
    grown = rss_kib(beanstalkd.proc.pid) - rss_before
    assert grown < 20_000, f"the server grew by {grown} KiB reading an endless line"
    flood.sendall(b"\r\n")
    assert _recv_line(flood) == b"BAD_FORMAT\r\n"
    flood.sendall(b"list-tube-used\r\n")  # the connection is still usable
    assert _recv_line(flood) == b"USING default\r\n"
    flood.close()
    round_trip(good)
    good.close()


@pytest.mark.slow
def test_server_survives_a_client_that_never_reads(beanstalkd: BeanstalkdProcess) -> None:
    """Replies pile up for a client that does not read: the server stops reading it instead."""
    good = beanstalkd.connect()
    rss_before = rss_kib(beanstalkd.proc.pid)
    deaf = beanstalkd.connect()
    deaf.setblocking(False)
    request = b"stats\r\n" * 1000
    sent = 0
    deadline = time.monotonic() + 3
    while time.monotonic() < deadline and sent < 64 << 20:
        try:
            sent += deaf.send(request)
        except BlockingIOError:
            time.sleep(0.01)  # the server stopped reading us: what we want
    assert beanstalkd.alive()
    assert round_trip(good) < soon(1.0)  # served beside the deaf one (a busy machine: slack)
    grown = rss_kib(beanstalkd.proc.pid) - rss_before
    assert grown < 30_000, f"the server grew by {grown} KiB for a client that never reads"
    deaf.close()
    good.close()


def test_partial_put_bodies_are_held_within_the_servers_budget(tmp_path: Path) -> None:
    """Reliability N4: 64 clients each send most of a 1 MiB body. The server holds at most
    --max-buffered (8 MiB) of bodies plus one read per client, not 64 MiB, keeps serving
    others, and every put completes once its client finishes sending."""
    size, clients, cap = 1 << 20, 64, 8 << 20
    server = BeanstalkdProcess(tmp_path, "--max-job-size", str(size), "--max-buffered",
                               str(cap), serve=True)
    good = server.connect()
    try:
        round_trip(good)
        rss_before = rss_kib(server.proc.pid)
        body = os.urandom(size)
        socks = [server.connect(timeout=60) for _ in range(clients)]
        for s in socks:
            s.setblocking(False)
        header = b"put 0 0 60 %d\r\n" % size
        first = [header + body[:-1000] for _ in socks]
        _send_what_is_taken(socks, first, time.monotonic() + 10)
        for _ in range(50):  # many turns of the server's loop: it has read what it will
            assert round_trip(good) < 1.0
        grown = rss_kib(server.proc.pid) - rss_before
        assert grown < 32_000, f"the server grew by {grown} KiB for {clients} partial bodies"
        rest = [data + body[-1000:] + b"\r\n" for data in first]
        _send_what_is_taken(socks, rest, time.monotonic() + 60, until_all=True)
        ids = []
        for s in socks:
            s.settimeout(60)
            reply = _recv_line(s)
            assert reply.startswith(b"INSERTED "), reply
            ids.append(int(reply.split()[1]))
            s.close()
        assert len(set(ids)) == clients
        good.sendall(b"peek %d\r\n" % ids[-1])
        found = b""
        while len(found) < size + 20:
            found += good.recv(1 << 20)
        assert found.startswith(b"FOUND %d %d\r\n" % (ids[-1], size))
        assert found.endswith(body + b"\r\n")
        assert server.alive()
    finally:
        good.close()
        server.stop()


def _send_what_is_taken(socks: list[socket.socket], data: list[bytes], deadline: float,
                        until_all: bool = False) -> None:
    """Send each socket's data without blocking, cutting each buffer down to what is left;
    return once every socket took all (until_all) or once none takes more."""
    while time.monotonic() < deadline:
        progress = False
        for i, s in enumerate(socks):
            if not data[i]:
                continue
            try:
                sent = s.send(data[i][:1 << 20])
            except BlockingIOError:
                continue
            data[i] = data[i][sent:]
            progress = progress or sent > 0
        if not any(data) or not (progress or until_all):
            return
        if not progress:
            time.sleep(0.01)
    assert not until_all, "the server stopped taking bodies"
