"""A throwaway PostgreSQL server in a temporary directory, for the tests and the bench.

Neither CI nor a developer's machine has a PostgreSQL we may use (Debian's own
cluster belongs to the system, and there is no Docker here), so the suite makes
its own: ``initdb`` into a fresh directory (in a pytest session, a copy of the one
cluster the run's first server made: :data:`PRISTINE_ENV`), ``pg_ctl start`` on a free
loopback port, and ``pg_ctl stop`` plus ``rm -rf`` at the end. ``initdb`` refuses to run
as root, so as root every server command runs as the ``postgres`` user (which
Debian's package creates) through ``runuser``.

This module needs nothing beyond the standard library and PostgreSQL's own
programs (``psql`` included), so the bench can import it as well as the pytest
fixtures in ``conftest.py``.

A server must never outlive the process that made it, even when that process is
SIGKILLed mid-test: each server has a small *reaper* process in its own session
that waits for the end of a pipe only the owner holds, then stops the server and
removes its directory. ``atexit`` and :meth:`PgServer.close` do the same on a
normal exit, so the reaper usually finds nothing left to do.

The suite's server (``conftest.py``'s ``pg_server``, ``parent=server_parent_directory()``)
keeps its directory in memory, in ``/dev/shm`` where that is a tmpfs with room: nothing
of it has to outlive the run. Its tests create and delete relation files all along (the
per-test reset TRUNCATEs what a test wrote, and a TRUNCATE gives each table and index a
new file), and a disk's filesystem makes that churn dear: on this machine's ext4, which
has no journal, the inode allocator checks every inode freed in the last minutes before
it reuses one, and `perf` put 24% of the servers' CPU in ``openat`` during the
PostgreSQL runs of ``tests/unit/test_lifecycle.py`` and ``test_limits.py``. Every other
server (the bench's, whose fsyncs or sizes are measured, and the fault tests' own)
stays in the default temporary directory.

Environment:
    SQLQ_PG_BINDIR: the directory holding ``initdb``, ``pg_ctl`` and ``psql``, when
        the newest ``/usr/lib/postgresql/*/bin`` (or the one on PATH) is not wanted.
    SQLQ_PG_TMPDIR: where the suite's server makes its directory instead of ``/dev/shm``.
"""

from __future__ import annotations

import atexit
import contextlib
import itertools
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any, NamedTuple

# Test speed: a crash of a throwaway server loses nothing anyone needs.
FAST_SETTINGS: dict[str, str] = {
    "fsync": "off",
    "synchronous_commit": "off",
    "full_page_writes": "off",
}
# The bench measures real durability: every commit reaches the disk, as in production.
DURABLE_SETTINGS: dict[str, str] = {
    "fsync": "on",
    "synchronous_commit": "on",
    "full_page_writes": "on",
}
SUPERUSER = "postgres"
#: A directory where a run keeps a cluster fresh from initdb, per installation, which each
#: server copies instead of running initdb (1-1.5 s of CPU; a run starts a dozen
#: servers): conftest.py sets it for a pytest session.
PRISTINE_ENV = "SQLQ_PG_PRISTINE"
START_TIMEOUT_S = 60
#: The suite's server goes to /dev/shm only if this much is free there (a container's
#: /dev/shm is often 64 MiB): its shared databases and a few clones.
RAM_NEEDED_BYTES = 1 << 30
RAM = "/dev/shm"
INSTALL_HINT = ("install Debian's `postgresql` package (apt-get install postgresql), or set "
                "SQLQ_PG_BINDIR to a directory holding initdb, pg_ctl and psql")

# Waits for EOF on stdin (the owner died or closed the pipe), then stops the server
# and removes its directory. Runs in its own session so that a Ctrl-C aimed at the
# owner's process group does not kill it before it has cleaned up.
_REAPER = """
import os, shutil, subprocess, sys
root, data, *stop = sys.argv[1:]
sys.stdin.buffer.read()
if os.path.exists(os.path.join(data, "postmaster.pid")):
    subprocess.run(stop, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
shutil.rmtree(root, ignore_errors=True)
"""


class PgUnavailable(RuntimeError):
    """PostgreSQL could not be found or started; the message says why and what to do."""


def find_bindir(wanted: Path | None = None) -> Path:
    """The directory of PostgreSQL's server programs: ``wanted``, or the newest installed.

    Debian keeps ``initdb`` and ``pg_ctl`` off PATH, in ``/usr/lib/postgresql/<v>/bin``;
    several versions may be installed side by side during an upgrade.

    Raises:
        PgUnavailable: no directory holds ``initdb``, ``pg_ctl`` and ``psql``.
    """
    wanted = wanted or (Path(os.environ["SQLQ_PG_BINDIR"]) if os.environ.get("SQLQ_PG_BINDIR")
                        else None)
    if wanted:
        candidates = [wanted]
    else:
        def version(p: Path) -> tuple[int, ...]:
            return tuple(int(x) for x in re.findall(r"\d+", p.parent.name)) or (0,)

        candidates = sorted(Path("/usr/lib/postgresql").glob("*/bin"), key=version, reverse=True)
        on_path = shutil.which("initdb")
        if on_path:
            candidates.append(Path(on_path).resolve().parent)
    for d in candidates:
        if all((d / prog).is_file() for prog in ("initdb", "pg_ctl", "psql")):
            return d
    where = wanted or "/usr/lib/postgresql/*/bin or on PATH"
    raise PgUnavailable(f"PostgreSQL's initdb, pg_ctl and psql were not found in {where}: "
                        + INSTALL_HINT)


def free_port() -> int:
    """A loopback TCP port nobody listens on right now (it can be taken before we bind)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def server_parent_directory() -> str | None:
    """Where the suite's server makes its directory: ``SQLQ_PG_TMPDIR``, else /dev/shm
    when it is a writable tmpfs with :data:`RAM_NEEDED_BYTES` free, else None (the
    default temporary directory)."""
    if os.environ.get("SQLQ_PG_TMPDIR"):
        return os.environ["SQLQ_PG_TMPDIR"]
    return ram_directory(RAM_NEEDED_BYTES)


def ram_directory(needed: int) -> str | None:
    """/dev/shm when it is a writable tmpfs with ``needed`` bytes free, else None."""
    try:
        with open("/proc/self/mounts", encoding="utf-8") as mounts:
            tmpfs = any(line.split()[1:3] == [RAM, "tmpfs"] for line in mounts)
    except OSError:
        return None
    if not tmpfs or not os.access(RAM, os.W_OK):
        return None
    return RAM if shutil.disk_usage(RAM).free >= needed else None


def _clean_env() -> dict[str, str]:
    """The environment without PG* variables, which would redirect psql and pg_ctl."""
    return {k: v for k, v in os.environ.items() if not k.startswith("PG")}


class Session(NamedTuple):
    """One client connection, as ``pg_stat_activity`` shows it."""

    pid: int
    database: str
    application: str
    state: str


class PgServer:
    """One throwaway PostgreSQL cluster: its own directory, port and socket.

    Example:
        with PgServer() as pg:
            pg.psql("CREATE TABLE t (x int)")
            name, url = pg.clone(pg.make_template("tmpl"))

    Args:
        durable: fsync and synchronous commit on (the bench) instead of off (tests).
        settings: more ``postgresql.conf`` settings, applied last.
        max_connections: the suite runs many processes against one server.
        parent: the directory to make the server's directory in (None: the default
            temporary directory).
    """

    _live: set[PgServer] = set()
    _counter = itertools.count(1)

    def __init__(self, *, durable: bool = False, settings: Mapping[str, str] | None = None,
                 max_connections: int = 300, bindir: Path | None = None,
                 parent: str | None = None) -> None:
        self.settings = dict(DURABLE_SETTINGS if durable else FAST_SETTINGS)
        self.settings["max_connections"] = str(max_connections)
        self.settings.update(settings or {})
        self.durable = durable
        self.wanted_bindir = bindir
        self.parent = parent
        self.bindir: Path | None = None
        self.root: Path | None = None
        self.port = 0
        self.owner_pid = os.getpid()
        self._reaper: subprocess.Popen[bytes] | None = None
        self._running = False
        self._admin_conn: Any = None
        self._admin_pid = 0
        self._major: int | None = None

    # ------------------------------------------------------------------ addresses

    @property
    def url(self) -> str:
        """A libpq URL of the ``postgres`` database as the superuser (trust auth)."""
        return self.url_for("postgres")

    def url_for(self, database: str) -> str:
        return f"postgresql://{SUPERUSER}@127.0.0.1:{self.port}/{database}"

    @property
    def dsn(self) -> str:
        """The same as :attr:`url`, in libpq's key=value form."""
        return f"host=127.0.0.1 port={self.port} user={SUPERUSER} dbname=postgres"

    @property
    def data(self) -> Path:
        assert self.root is not None, "the server was never started"
        return self.root / "data"

    @property
    def log_path(self) -> Path:
        assert self.root is not None, "the server was never started"
        return self.root / "server.log"

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> PgServer:
        """initdb on the first call, then start the server and wait until it accepts.

        Raises:
            PgUnavailable: with the reason (missing programs, initdb or start failure,
                and the end of the server's log).
        """
        if self._running:
            return self
        if self.root is None:
            self._init()
        if self.port == 0:
            self._start_on_free_port()
        else:
            self._pg_ctl_start()
        self._running = True
        return self

    def stop(self, mode: str = "fast") -> None:
        """Stop the server, keeping its data (``start()`` brings it back on the same port).

        Args:
            mode: pg_ctl's shutdown mode: ``fast`` (roll back, disconnect) or
                ``immediate`` (no checkpoint: a crash, recovered at the next start).
        """
        if not self._running:
            return
        self._pg_ctl("stop", "-m", mode, "-w", "-t", str(START_TIMEOUT_S))
        self._running = False

    def restart(self, mode: str = "fast") -> None:
        """Stop and start again on the same port: every connection is cut, data stays."""
        self.stop(mode)
        self.start()

    def close(self) -> None:
        """Stop the server and remove its directory. Safe to call twice."""
        if self.root is None or os.getpid() != self.owner_pid:
            return  # a forked child must not tear down its parent's server
        if self._admin_conn is not None and self._admin_pid == os.getpid():
            with contextlib.suppress(Exception):
                self._admin_conn.close()
        self._admin_conn = None
        if self.postmaster_pid() is not None:  # running, or left half-started by a failure
            with contextlib.suppress(Exception):
                self._pg_ctl("stop", "-m", "fast", "-w", "-t", str(START_TIMEOUT_S))
        self._running = False
        shutil.rmtree(self.root, ignore_errors=True)
        self.root = None
        if self._reaper is not None:
            assert self._reaper.stdin is not None
            self._reaper.stdin.close()  # it wakes, finds nothing left, and exits
            with contextlib.suppress(subprocess.TimeoutExpired):
                self._reaper.wait(10)
            self._reaper = None
        PgServer._live.discard(self)

    def __enter__(self) -> PgServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def running(self) -> bool:
        return self._running

    # ---------------------------------------------------------------- SQL helpers

    def psql(self, sql: str, database: str = "postgres") -> str:
        """Run SQL through ``psql`` as the superuser; unaligned tuples, one row a line.

        Each statement runs on its own (``psql -f -``), so ``CREATE DATABASE`` works.

        Raises:
            RuntimeError: psql failed; the message is its error output.
        """
        r = subprocess.run(self._psql_cmd(database), input=sql, capture_output=True, text=True,
                           env=_clean_env(), timeout=120)
        if r.returncode != 0:
            raise RuntimeError(f"psql failed ({r.returncode}): {r.stderr.strip()}")
        return r.stdout.strip()

    def _psql_cmd(self, database: str) -> list[str]:
        return [str(self._bin("psql")), "-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1",
                "-h", "127.0.0.1", "-p", str(self.port), "-U", SUPERUSER, "-d", database,
                "-f", "-"]

    def sessions(self, database: str | None = None) -> list[Session]:
        """The client sessions connected now (to ``database``, or to any), oldest first.

        For fault tests that must find a particular connection to cut, such as a
        listener (by its ``application_name``), and for leak checks.
        """
        where = f" AND datname = '{_check_name(database)}'" if database else ""
        out = self.psql(
            "SELECT pid, datname, coalesce(application_name, ''), coalesce(state, '')"
            " FROM pg_stat_activity WHERE backend_type = 'client backend'"
            f" AND pid <> pg_backend_pid(){where} ORDER BY backend_start")
        rows = [line.split("|", 3) for line in out.splitlines() if line]
        return [Session(int(pid), db, app, state) for pid, db, app, state in rows]

    @contextlib.contextmanager
    def open_transaction(self, database: str = "postgres") -> Iterator[int]:
        """Hold a REPEATABLE READ snapshot open until the block ends; yields its backend pid.

        What a forgotten transaction elsewhere on the server does to a queue: dead
        rows newer than its snapshot cannot be vacuumed, and claims slow down.
        """
        proc = subprocess.Popen(self._psql_cmd(database), stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                env=_clean_env())
        assert proc.stdin is not None and proc.stdout is not None
        try:
            # txid_current() gives the transaction an id and the SELECT its snapshot
            proc.stdin.write("BEGIN ISOLATION LEVEL REPEATABLE READ;\n"
                             "SELECT pg_backend_pid(), txid_current();\n")
            proc.stdin.flush()
            line = proc.stdout.readline()
            if not line:
                raise RuntimeError("psql could not open a transaction: "
                                   + (proc.stderr.read() if proc.stderr else "").strip())
            pid = int(line.split("|")[0])
            yield pid
        finally:
            proc.stdin.close()  # psql ends; the server rolls the transaction back
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        # The backend notices the closed socket and ends on its own time: until it has,
        # its snapshot still holds dead rows back (a loaded machine showed it).
        deadline = time.monotonic() + 30
        while pid in {s.pid for s in self.sessions(database)} and time.monotonic() < deadline:
            time.sleep(0.02)

    def terminate(self, backend_pid: int) -> bool:
        """``pg_terminate_backend``: cut one session as a crash or an admin would.

        Waits (up to 5 s) until the backend has exited, so the client sees the cut
        at its next statement. Returns False if no such backend existed.
        """
        return self.psql(f"SELECT pg_terminate_backend({int(backend_pid)}, 5000)") == "t"

    def create_database(self, name: str, template: str | None = None,
                        encoding: str | None = None) -> str:
        """Create a database (from ``template``, if given); returns its URL.

        ``encoding="SQL_ASCII"`` makes what ``initdb --no-locale`` gives every database
        (C collation, from ``template0``): text is stored as the client's bytes.
        """
        _check_name(name)
        clause = f" TEMPLATE {_check_name(template)}" if template else ""
        if encoding is not None:
            if template is not None or not re.fullmatch(r"[A-Z0-9_]+", encoding):
                raise ValueError(f"encoding {encoding!r}: a plain name, without template")
            clause = f" ENCODING '{encoding}' LC_COLLATE 'C' LC_CTYPE 'C' TEMPLATE template0"
        if template and self.major() >= 15:
            # copy the files, not WAL-log every block: 3x faster for a small template
            clause += " STRATEGY FILE_COPY"
        self._admin(f"CREATE DATABASE {name}{clause}")
        return self.url_for(name)

    def drop_database(self, name: str) -> None:
        """Drop a database, cutting whoever is still connected (a test that leaked)."""
        self._admin(f"DROP DATABASE IF EXISTS {_check_name(name)} WITH (FORCE)")

    def _admin(self, sql: str) -> None:
        """One statement as the superuser: through a kept psycopg session when the
        driver is installed (a test's database costs 30 ms less than through psql),
        else through psql. The session is remade after a restart cut it, and per
        process: a forked child must not talk on its parent's socket.
        """
        try:
            import psycopg
        except ImportError:
            self.psql(sql)
            return
        for attempt in (1, 2):
            conn = self._admin_conn
            if conn is None or conn.closed or self._admin_pid != os.getpid():
                conn = self._admin_conn = psycopg.connect(self.url, autocommit=True)
                self._admin_pid = os.getpid()
            try:
                conn.execute(sql.encode())
                return
            except psycopg.OperationalError:
                self._admin_conn = None
                if attempt == 2:
                    raise

    def make_template(self, name: str, setup: Callable[[str], None] | None = None,
                      encoding: str | None = None) -> str:
        """Create database ``name`` (in ``encoding``, if given: see
        :meth:`create_database`), let ``setup(url)`` fill it, and freeze it as a template.

        ``CREATE DATABASE … TEMPLATE`` copies files, so one migration run serves
        every test. A template must have no open session when it is copied: the
        sessions ``setup`` left open are cut, and new ones are refused.
        """
        self.create_database(name, encoding=encoding)
        if setup is not None:
            setup(self.url_for(name))
        self.psql(f"ALTER DATABASE {name} WITH IS_TEMPLATE true ALLOW_CONNECTIONS false;\n"
                  "SELECT count(pg_terminate_backend(pid, 5000)) FROM pg_stat_activity"
                  f" WHERE datname = '{name}'")
        return name

    def clone(self, template: str, prefix: str = "t_") -> tuple[str, str]:
        """A new database copied from ``template``: (name, url)."""
        name = f"{prefix}{next(PgServer._counter)}"
        return name, self.create_database(name, template)

    # -------------------------------------------------------------- processes

    def postmaster_pid(self) -> int | None:
        """The server's main process, from ``postmaster.pid`` (None when stopped)."""
        try:
            return int((self.data / "postmaster.pid").read_text().split("\n", 1)[0])
        except (OSError, ValueError, AssertionError):
            return None

    def pids(self) -> list[int]:
        """The postmaster and every process it forked (backends, walwriter, …)."""
        top = self.postmaster_pid()
        if top is None:
            return []
        with contextlib.suppress(OSError):  # the kernel's list: 1 ms, where a scan takes 4-10
            return [top, *(int(p) for p in Path(f"/proc/{top}/task/{top}/children")
                           .read_text().split())]
        out = [top]
        for stat in Path("/proc").glob("[0-9]*/stat"):
            with contextlib.suppress(OSError, ValueError, IndexError):
                # the command name may hold spaces and parentheses: split after the last ')'
                if int(stat.read_text().rsplit(")", 1)[1].split()[1]) == top:
                    out.append(int(stat.parent.name))
        return out

    def cpu_seconds(self) -> float:
        """The CPU the server has used: the postmaster's own and that of every process it
        forked, ended (reaped: the postmaster's children's times) or still running."""
        pids = self.pids()
        total = 0
        for pid in pids:
            with contextlib.suppress(OSError, ValueError, IndexError):
                fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
                # utime, stime (fields 14, 15); for the postmaster cutime, cstime too
                total += sum(int(f) for f in fields[11:15 if pid == pids[0] else 13])
        return total / os.sysconf("SC_CLK_TCK")

    def major(self) -> int:
        """The major version of the server programs (15 for PostgreSQL 15.18)."""
        if self._major is None:
            found = re.search(r"(\d+)", self.version())
            self._major = int(found.group(1)) if found else 0
        return self._major

    def version(self) -> str:
        r = subprocess.run([str(self._bin("pg_ctl")), "--version"], capture_output=True,
                           text=True, env=_clean_env())
        return r.stdout.strip().replace("pg_ctl (PostgreSQL) ", "PostgreSQL ")

    def log_tail(self, lines: int = 20) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except (OSError, AssertionError):
            return ""

    # -------------------------------------------------------------- internals

    def _bin(self, prog: str) -> Path:
        if self.bindir is None:
            self.bindir = find_bindir(self.wanted_bindir)
        return self.bindir / prog

    def _as_owner(self) -> list[str]:
        """Prefix for server commands: as root they run as ``postgres`` (initdb refuses root)."""
        if os.geteuid() != 0:
            return []
        if shutil.which("runuser") is None:
            raise PgUnavailable("running as root needs `runuser` (util-linux) to start "
                                "PostgreSQL as the postgres user")
        try:
            import pwd

            pwd.getpwnam(SUPERUSER)
        except KeyError:
            raise PgUnavailable("running as root needs the `postgres` user, which Debian's "
                                "postgresql package creates: " + INSTALL_HINT) from None
        return ["runuser", "-u", SUPERUSER, "--"]

    def _run(self, cmd: list[str], what: str) -> None:
        try:
            r = subprocess.run([*self._as_owner(), *cmd], capture_output=True, text=True,
                               env=_clean_env(), stdin=subprocess.DEVNULL,
                               timeout=START_TIMEOUT_S + 30)
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise PgUnavailable(f"{what} failed: {exc}") from None
        if r.returncode != 0:
            detail = (r.stderr or r.stdout).strip()
            log = self.log_tail()
            raise PgUnavailable(f"{what} failed (exit {r.returncode}): {detail}"
                                + (f"\nserver log:\n{log}" if log else ""))

    def _pg_ctl(self, *args: str) -> None:
        self._run([str(self._bin("pg_ctl")), "-D", str(self.data), *args], f"pg_ctl {args[0]}")

    def _init(self) -> None:
        prefix = self._as_owner()
        root = Path(tempfile.mkdtemp(prefix="sqlq-pg-", dir=self.parent))
        self.root = root
        PgServer._live.add(self)
        if prefix:
            shutil.chown(root, SUPERUSER, SUPERUSER)
        stop = [*prefix, str(self._bin("pg_ctl")), "-D", str(root / "data"), "-m", "immediate",
                "-w", "-t", "30", "stop"]
        self._reaper = subprocess.Popen(
            [sys.executable, "-c", _REAPER, str(root), str(root / "data"), *stop],
            stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            start_new_session=True, env=_clean_env())
        pristine = os.environ.get(PRISTINE_ENV)
        if pristine:
            self._run(["cp", "-a", str(self._pristine(Path(pristine))), str(self.data)],
                      "copying the run's pristine cluster")
        else:
            self._initdb(self.data)

    def _initdb(self, data: Path) -> None:
        # -N: no fsync of the fresh cluster; only the running server's settings matter.
        self._run([str(self._bin("initdb")), "-D", str(data), "-U", SUPERUSER,
                   "--auth=trust", "--encoding=UTF8", "--no-locale", "-N"], "initdb")

    def _pristine(self, base: Path) -> Path:
        """The run's cluster fresh from this installation's initdb, made by the first
        server that asks (under a lock: the test processes start theirs at once)."""
        import fcntl
        import hashlib

        key = hashlib.sha256(str(self._bin("initdb").resolve()).encode()).hexdigest()[:12]
        with open(base / f"{key}.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            if not (base / key).is_dir():
                work = Path(tempfile.mkdtemp(prefix=f"{key}.", dir=base))
                if self._as_owner():
                    shutil.chown(work, SUPERUSER, SUPERUSER)
                self._initdb(work / "data")
                os.rename(work, base / key)  # whole, or not there
        return base / key / "data"

    def _write_conf(self) -> None:
        conf = {"listen_addresses": "'127.0.0.1'", "port": str(self.port),
                "unix_socket_directories": f"'{self.root}'"}
        conf.update({k: _quote(v) for k, v in self.settings.items()})
        # postgresql.conf is read top to bottom and the last line wins: append.
        with open(self.data / "postgresql.conf", "a") as f:
            f.write("\n# sqlq tests/pgserver.py\n")
            f.writelines(f"{k} = {v}\n" for k, v in conf.items())

    def _start_on_free_port(self) -> None:
        """Another process may take the port between our probe and the server's bind."""
        for attempt in range(5):
            self.port = free_port()
            self._write_conf()
            try:
                self._pg_ctl_start()
                return
            except PgUnavailable:
                if attempt == 4 or "could not bind" not in self.log_tail():
                    raise

    def _pg_ctl_start(self) -> None:
        self._pg_ctl("start", "-w", "-t", str(START_TIMEOUT_S), "-l", str(self.log_path))


def _check_name(name: str) -> str:
    """Database names are formatted into SQL (they cannot be bound): allow only identifiers."""
    if not re.fullmatch(r"[a-z_][a-z0-9_]{0,62}", name):
        raise ValueError(f"not a plain database name: {name!r}")
    return name


def _quote(value: str) -> str:
    return value if re.fullmatch(r"[\w.-]+", value) else "'" + value.replace("'", "''") + "'"


@atexit.register
def _close_all() -> None:
    for server in list(PgServer._live):
        server.close()
