"""Shared fixtures: a fresh database file per test, a fake clock, subprocess helpers, and a
throwaway PostgreSQL server with a fresh database per test."""

from __future__ import annotations

import itertools
import os
import re
import shutil
import subprocess
import sys
import tempfile
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import pytest

import sqlq

from . import forkserver
from .pgserver import (
    PRISTINE_ENV,
    PgServer,
    PgUnavailable,
    ram_directory,
    server_parent_directory,
)
from .timing import FakeClock

if TYPE_CHECKING:
    from .pgdb import SharedDatabase

ROOT = Path(__file__).resolve().parent.parent


_tmp_numbers = itertools.count()


@pytest.fixture
def tmp_path(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A new directory for the test, named as pytest names it, numbered without pytest's
    look at every directory it made before: that look made a test process's N tests cost
    N*N/2 directory entries read (about a second of CPU per test process in this suite).
    Kept as pytest keeps them."""
    name = re.sub(r"\W", "_", request.node.name)[:30]
    while True:
        path = tmp_path_factory.getbasetemp() / f"{name}-{next(_tmp_numbers)}"
        try:
            path.mkdir(mode=0o700)
            return path
        except FileExistsError:
            continue  # one of tmp_path_factory's own: the next number


@pytest.fixture
def db_path(tmp_path: Path) -> str:
    """Where this test's file goes; nothing is there yet (the tests of a new file's
    creation and migration use it as it is)."""
    return str(tmp_path / "q.db")


@pytest.fixture(scope="session")
def sqlite_template(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A file migrated once per test process, that ``db_url`` copies: a fresh file for
    2 ms instead of the 40 ms that creating and migrating one takes (as ``pg_template``
    does for PostgreSQL)."""
    path = str(tmp_path_factory.mktemp("template") / "template.db")
    sqlq.Queue(path).close()
    return path


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


#: Every test that uses ``db_url`` (and so ``q`` and ``fq``) runs once per backend,
#: unless marked ``sqlite_only`` (it is about the file itself); in modules marked
#: ``sqlite3_driver``, once more on a file opened through Python's sqlite3 (backend
#: ``"sqlite3"``: SQLQ_SQLITE_DRIVER is set for the test and the processes it starts).
BACKENDS = ("sqlite", "postgres")
#: Backend ``"postgres-ascii"``: a PostgreSQL database in SQL_ASCII, what ``initdb
#: --no-locale`` gives every database, where a client that does not ask for UTF8 gets
#: text back as bytes (issue 22, F8). Every test under tests/unit runs on it too (258
#: more runs, 31% of the unit tests' time: about a minute on two cores); elsewhere only
#: those marked ``sql_ascii``, where a process-heavy test would cost more.
ASCII_BACKEND = "postgres-ascii"
UNIT_DIR = Path(__file__).resolve().parent / "unit"


def is_postgres(backend: str) -> bool:
    """Whether the test's backend is a PostgreSQL database (in UTF8 or SQL_ASCII)."""
    return backend.startswith("postgres")


#: The tiers (tests/README.md). A test marked ``face`` checks what a face refuses or
#: answers before any SQL runs (argument types and values, names, parity between faces):
#: it runs on SQLite alone. The others run on every backend; in modules marked
#: ``both_apis``, the AsyncQueue (which runs the Queue's own verbs in a thread, and waits
#: on the backend's notifier: inotify, or the LISTEN reader's pipe) runs on one database
#: of each kind, the Queue on every backend.
ASYNC_BACKENDS = ("sqlite", "postgres")


def backends_of(definition: pytest.Function | pytest.Item) -> tuple[str, ...]:
    """The backends a test that takes ``backend`` runs on, by its markers and folder."""
    if definition.get_closest_marker("face"):
        return ("sqlite",)
    only = definition.get_closest_marker("sqlite_only")
    backends: tuple[str, ...] = ("sqlite",) if only else BACKENDS
    if definition.get_closest_marker("postgres_only"):
        backends = ("postgres",)
    if not only and (UNIT_DIR in Path(str(definition.path)).parents
                     or definition.get_closest_marker("sql_ascii")):
        backends = (*backends, ASCII_BACKEND)
    if definition.get_closest_marker("sqlite3_driver"):
        backends = (*backends, "sqlite3")
    return backends


T = TypeVar("T")

#: The run's pristine PostgreSQL cluster's directory, when this process made it.
_PRISTINE: list[str] = []
#: Free room /dev/shm must have to hold the run's temporary files: they come to ~1 GB,
#: beside the PostgreSQL server's (pgserver.RAM_NEEDED_BYTES).
TMP_RAM_NEEDED_BYTES = 4 << 30


@pytest.hookimpl(tryfirst=True)  # before pytest's tmp_path_factory looks for its root
def pytest_configure(config: pytest.Config) -> None:
    if "TMPDIR" not in os.environ and (ram := ram_directory(TMP_RAM_NEEDED_BYTES)):
        # Temporary files in RAM: the tests' databases and sockets, and those of the
        # processes they start. A test waiting for a disk's sync leaves its core idle
        # (make test idled 56-70 core-s in five runs so, 65-106 in six on this machine's
        # disk; the CPU used was the same), for what no test checks: power cuts are
        # tests/powercut.py's recording VFS, whose syncs take a disk's time wherever the
        # files are. A TMPDIR the caller set is kept.
        os.environ["TMPDIR"] = ram
        tempfile.tempdir = None  # gettempdir() looks again
    if os.environ.get("SQLQ_TEST_CPU"):  # where the suite's CPU goes (tests/cpu_report.py)
        from .cpu_report import CpuReport

        config.pluginmanager.register(CpuReport(os.environ["SQLQ_TEST_CPU"]), "sqlq-cpu")
    if not os.environ.get(PRISTINE_ENV):  # one initdb a run (pgserver.py); xdist's test
        base = tempfile.mkdtemp(prefix="sqlq-pg-pristine-",  # processes inherit it
                                dir=server_parent_directory())
        os.chmod(base, 0o755)  # the postgres user copies from it
        os.environ[PRISTINE_ENV] = base
        _PRISTINE.append(base)


def pytest_unconfigure(config: pytest.Config) -> None:
    for base in _PRISTINE:
        shutil.rmtree(base, ignore_errors=True)
        os.environ.pop(PRISTINE_ENV, None)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    both_apis = ("api" in metafunc.fixturenames
                 and metafunc.definition.get_closest_marker("both_apis") is not None)
    if "backend" in metafunc.fixturenames:
        backends = backends_of(metafunc.definition)
        if both_apis:
            pairs = [(b, api) for b in backends for api in ("sync", "async")
                     if api == "sync" or b in ASYNC_BACKENDS]
            metafunc.parametrize(("backend", "api"), pairs, ids=[f"{b}-{a}" for b, a in pairs])
        else:
            metafunc.parametrize("backend", backends)
    elif both_apis:
        metafunc.parametrize("api", ("sync", "async"))


@pytest.fixture(autouse=True)
def _sqlite_driver(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """Backend ``"sqlite3"``: every Queue of the test (and its child processes) opens the
    file through Python's sqlite3."""
    callspec = getattr(request.node, "callspec", None)
    if callspec is not None and callspec.params.get("backend") == "sqlite3":
        monkeypatch.setenv("SQLQ_SQLITE_DRIVER", "sqlite3")


@pytest.fixture
def api() -> str:
    """How ``q``/``fq`` are driven: the Queue itself, or (tests marked ``both_apis``, once
    more) an AsyncQueue through tests/asyncbridge.py."""
    return "sync"


def open_queue(api: str, db_url: str, **options: object) -> sqlq.Queue:
    """A Queue, or the AsyncQueue bridge that answers to the same calls."""
    if api == "async":
        from .asyncbridge import BridgedQueue

        return BridgedQueue(db_url, **options)  # type: ignore[return-value]
    return sqlq.Queue(db_url, **options)  # type: ignore[arg-type]


@pytest.fixture
def db_url(backend: str, request: pytest.FixtureRequest) -> str:
    """A fresh, migrated database of this test's backend: a file path (a copy of
    ``sqlite_template``), or a PostgreSQL URL (through
    PgBouncer in the pool mode SQLQ_TEST_PG_POOL names, if set: the semantics through a
    pooler, with nothing added to its URL)."""
    if is_postgres(backend):
        url = str(request.getfixturevalue(PG_URLS[backend]))
        pool = os.environ.get("SQLQ_TEST_PG_POOL")
        return request.getfixturevalue("pgbouncer")(pool).through(url) if pool else url
    path = str(request.getfixturevalue("db_path"))
    shutil.copyfile(request.getfixturevalue("sqlite_template"), path)
    return path


@pytest.fixture
def app_file(db_path: str) -> str:
    """A sqlq file that also holds the application's ``orders`` table; no Queue left open
    (the own-transaction tests, in unit/ and integration/)."""
    with sqlq.Queue(db_path, durability="normal") as queue, queue.transaction() as tx:
        tx.execute("CREATE TABLE orders (id INTEGER PRIMARY KEY, item TEXT NOT NULL)")
    return db_path


@pytest.fixture
def q(db_url: str, api: str) -> Iterator[sqlq.Queue]:
    """A queue on a fresh database, durability normal (fsync cost is not what tests check)."""
    queue = open_queue(api, db_url, durability="normal")
    yield queue
    queue.close()


@pytest.fixture
def fq(db_url: str, clock: FakeClock, api: str) -> Iterator[sqlq.Queue]:
    """A queue on a fresh database driven by the fake clock."""
    queue = open_queue(api, db_url, durability="normal", clock=clock)
    yield queue
    queue.close()


def spawn(code: str, *args: str, env: dict[str, str] | None = None, cold: bool = False,
          **kwargs: object) -> subprocess.Popen[str]:
    """Run a Python snippet in a new process (a real, separate one: tests/forkserver.py);
    ``cold``: in a new interpreter that has imported nothing yet (the tests of what a
    process imports, or of what it does where a module is missing)."""
    env = dict(os.environ if env is None else env, PYTHONPATH=str(ROOT))
    start = subprocess.Popen if cold else forkserver.Popen
    return start(  # type: ignore[call-overload, no-any-return]
        [sys.executable, "-c", textwrap.dedent(code), *args],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, **kwargs,
    )


# ------------------------------------------------------------------ PostgreSQL


@pytest.fixture(scope="session")
def pg_server(request: pytest.FixtureRequest) -> Iterator[PgServer]:
    """One throwaway PostgreSQL server for the session (tests/pgserver.py).

    Loopback only, fsync off. ``url``/``dsn``/``port`` address it; ``psql(sql)``,
    ``terminate(backend_pid)``, ``stop()``, ``start()`` and ``restart()`` serve the
    fault tests. When it cannot start, every test that uses it fails with the
    reason: a PostgreSQL suite that silently skips would hide a broken backend.
    """
    server = PgServer(parent=server_parent_directory())
    try:
        server.start()
    except PgUnavailable as exc:
        server.close()
        pytest.fail(f"the PostgreSQL tests need a server and none could be started: {exc}",
                    pytrace=False)
    cpu = request.config.pluginmanager.get_plugin("sqlq-cpu")
    if cpu is not None:
        cpu.server = server  # its CPU, test by test (tests/cpu_report.py)
    yield server
    server.close()


@pytest.fixture(scope="session")
def pg_template_setup() -> Callable[[str], None] | None:
    """What fills the template database that every ``pg_url`` database is copied from:
    sqlq's migrations, run once per session, so that each test gets a migrated
    database for the cost of a file copy."""
    def migrate(url: str) -> None:
        sqlq.Queue(url).close()  # creates sqlq's tables; leaves no session behind

    return migrate


@pytest.fixture(scope="session")
def pg_template(pg_server: PgServer, pg_template_setup: Callable[[str], None] | None) -> str:
    """The name of the session's template database (filled by ``pg_template_setup``)."""
    return pg_server.make_template("sqlq_template", pg_template_setup)


@pytest.fixture(scope="session")
def pg_ascii_template(pg_server: PgServer,
                      pg_template_setup: Callable[[str], None] | None) -> str:
    """The template of ``pg_ascii_url``: as ``pg_template``, in SQL_ASCII (C locale)."""
    return pg_server.make_template("sqlq_template_ascii", pg_template_setup,
                                   encoding="SQL_ASCII")


#: The fixture of a fresh database, and of its template, per PostgreSQL backend.
PG_URLS = {"postgres": "pg_url", ASCII_BACKEND: "pg_ascii_url"}
PG_TEMPLATES = {"postgres": "pg_template", ASCII_BACKEND: "pg_ascii_template"}
#: The process's shared database per PostgreSQL backend (``tests/pgdb.py``).
PG_SHARED = {"postgres": "pg_shared", ASCII_BACKEND: "pg_ascii_shared"}


def _fresh_database(pg_server: PgServer, template: str) -> Iterator[str]:
    name, url = pg_server.clone(template)
    yield url
    if not pg_server.running:
        pg_server.start()
    pg_server.drop_database(name)


def _database_for(request: pytest.FixtureRequest, pg_server: PgServer, template: str,
                  shared: str) -> Iterator[str]:
    """The shared database reset after the test (``tests/pgdb.py``), or, for a test
    marked ``pg_fresh`` (every test when SQLQ_TEST_PG_FRESH is set: to tell whether a
    failure comes from the sharing), a clone of its own."""
    if request.node.get_closest_marker("pg_fresh") or os.environ.get("SQLQ_TEST_PG_FRESH"):
        yield from _fresh_database(pg_server, template)
        return
    database: SharedDatabase = request.getfixturevalue(shared)
    yield database.url
    why = database.reset()
    if why is not None:
        request.node.user_properties.append(("pg_recloned", why))


@pytest.fixture(scope="session")
def pg_shared(pg_server: PgServer, pg_template: str) -> Iterator[SharedDatabase]:
    """This process's database cloned from ``pg_template``, reset between tests."""
    from .pgdb import SharedDatabase

    database = SharedDatabase(pg_server, pg_template, "utf8")
    yield database
    database.close()


@pytest.fixture(scope="session")
def pg_ascii_shared(pg_server: PgServer, pg_ascii_template: str) -> Iterator[SharedDatabase]:
    """As ``pg_shared``, from ``pg_ascii_template``."""
    from .pgdb import SharedDatabase

    database = SharedDatabase(pg_server, pg_ascii_template, "ascii")
    yield database
    database.close()


@pytest.fixture
def pg_url(request: pytest.FixtureRequest, pg_server: PgServer, pg_template: str
           ) -> Iterator[str]:
    """A database for this test as fresh as a copy of the template: its ``postgresql://`` URL.

    This process's shared database (``pg_shared``), reset after the test: its sessions
    cut, its tables emptied, a name of its own per test (``tests/pgdb.py``); a test that
    left the server stopped gets it started again first. A test marked ``pg_fresh``
    gets a clone of the template instead, dropped afterwards.
    """
    yield from _database_for(request, pg_server, pg_template, "pg_shared")


@pytest.fixture
def pg_ascii_url(request: pytest.FixtureRequest, pg_server: PgServer, pg_ascii_template: str
                 ) -> Iterator[str]:
    """As ``pg_url``, a database in SQL_ASCII (what ``initdb --no-locale`` makes)."""
    yield from _database_for(request, pg_server, pg_ascii_template, "pg_ascii_shared")


@pytest.fixture(scope="session")
def pgbouncer(pg_server: PgServer) -> Iterator[Callable[[str], Any]]:
    """PgBouncer (Debian's) in front of ``pg_server``, one per pool mode, started on first
    ask: ``pgbouncer("transaction").through(pg_url)`` is the test's database through a
    transaction pool (``tests/servers.py``: ``PgBouncer``). Missing, the test fails and
    names the package."""
    from .servers import PgBouncer

    started: dict[str, PgBouncer] = {}

    def get(mode: str) -> PgBouncer:
        if mode not in started:
            started[mode] = PgBouncer(pg_server, mode).start()
        elif started[mode].proc is None:
            started[mode].start()  # a test stopped it
        return started[mode]

    yield get
    for bouncer in started.values():
        bouncer.close()


# ------------------------------------------------------------------ run summary lines

_SUMMARY_LINES: list[str] = []


@pytest.fixture
def summary_line(request: pytest.FixtureRequest) -> Callable[[str], None]:
    """Report one line in the run's final summary: the chaos and power-cut runs report
    their counts (jobs lost, duplicates, cuts) this way. Unlike a print, it reaches the
    summary from pytest-xdist's workers too (through the test report)."""
    def report(line: str) -> None:
        request.node.user_properties.append(("summary", line))

    return report


_RECLONED: list[str] = []


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The tests marked slow first, each module's spread evenly among them
    (:func:`in_turn`); then the others in their order. Handed out one at a time (make
    test's --dist loadgroup), the longest start first and the short ones fill the gaps,
    where a run whose longest tests came last (tests/unit's hypothesis and randomized
    runs sort after tests/system) ended with one process running them while the others
    waited. Spread: a module's slow tests tend to wait alike (test_pg_liveness's sleep
    through graces, a chaos run burns CPU), and in a row five of them sleeping at once
    left both cores idle for a minute and a half of a seven-minute run."""
    slow: dict[str, list[pytest.Item]] = {}
    rest: list[pytest.Item] = []
    for item in items:
        if item.get_closest_marker("slow"):
            slow.setdefault(item.nodeid.partition("::")[0], []).append(item)
        else:
            rest.append(item)
    items[:] = [*in_turn(list(slow.values())), *rest]


def in_turn(groups: list[list[T]]) -> list[T]:
    """The groups' members merged, each group's spread evenly over the whole: its k-th of
    n stands at (k + 1/2) / n of the way (a round-robin would leave the groups with the
    most members, test_pg_liveness's seventeen sleepers, alone at the end)."""
    placed = sorted(((k + 0.5) / len(group), g, member)
                    for g, group in enumerate(groups) for k, member in enumerate(group))
    return [member for _, _, member in placed]


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if report.when == "call":
        _SUMMARY_LINES.extend(str(v) for k, v in report.user_properties if k == "summary")
    if report.when == "teardown":
        _RECLONED.extend(f"{report.nodeid}: {v}" for k, v in report.user_properties
                         if k == "pg_recloned")


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if _RECLONED:
        terminalreporter.section("PostgreSQL databases cloned again: mark these tests pg_fresh")
        for line in _RECLONED:
            terminalreporter.write_line(line)
    if _SUMMARY_LINES:
        terminalreporter.section("chaos and power cuts")
        for line in _SUMMARY_LINES:
            terminalreporter.write_line(line)


@pytest.fixture
def srv(db_url: str) -> Iterator[Any]:
    """An in-process server over a fresh database of the test's backend."""
    from .servers import Running

    running = Running(db_url)
    yield running
    running.stop()
