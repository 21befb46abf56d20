"""The systems under test: one small adapter class each, all with the same interface.

A ``System`` is a recipe: ``start(workdir)`` makes a fresh, empty instance (a new
database file, or a new beanstalkd server with a fresh binlog directory),
``client()`` opens a connection to it (called inside the measuring process, after
fork), ``stop()`` tears it down. A ``Client`` has the verbs the workloads use:

    put(body)                  one job, one transaction
    put_many(bodies)           one batch, one transaction (NotSupported if none)
    put_delayed_many(bodies)   a batch delayed by an hour (NotSupported if none)
    take(prev, timeout)        finish ``prev`` (delete/ack; None = nothing) and claim
                               the next job; None if none came within ``timeout``
                               (0 = do not wait). Returns an opaque handle.
    finish(handle)             delete/ack without claiming another
    body(handle) -> bytes
    close()

This module holds the interface, sqlq's adapter and the raw apsw floor; the peers'
adapters are in peers.py, the PostgreSQL systems (their own servers, a raw psycopg
floor, sqlq-pg) in pg_peers.py, and the list of them all in lineup.py.
"""

from __future__ import annotations

import contextlib
import os
import select
import time
from importlib import metadata
from pathlib import Path
from typing import Any

TUBE = "bench"
DELAY_S = 3600  # "delayed" jobs in the depth workload wait an hour
SERVER_PROCESSES = 2
"""``sqlq-beanstalkd -P``'s count in rows 5 and 6 (targets.py): this machine's two cores."""


class NotSupported(Exception):
    """The system has no such verb (shown as n/a in the table)."""


def _dist_version(name: str) -> str:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return "?"


def _files_bytes(paths: list[Path]) -> int:
    total = 0
    for p in paths:
        with contextlib.suppress(FileNotFoundError):
            total += p.stat().st_size
    return total


def _sqlite_files(db: Path) -> list[Path]:
    return [db, Path(f"{db}-wal"), Path(f"{db}-shm")]


class Client:
    def put(self, body: bytes) -> None:
        raise NotImplementedError

    def put_many(self, bodies: list[bytes]) -> None:
        raise NotSupported("no batched put")

    def put_delayed_many(self, bodies: list[bytes]) -> None:
        raise NotSupported("no batched delayed put")

    def take(self, prev: object, timeout: float) -> object | None:
        raise NotImplementedError

    def finish(self, handle: object) -> None:
        raise NotImplementedError

    def body(self, handle: object) -> bytes:
        raise NotImplementedError

    def close(self) -> None:
        pass


class System:
    name = "?"          # row label, e.g. "sqlq-full"
    family = "?"        # sqlq, raw, beanstalkd, huey, persist-queue, litequeue, honker
    durability = "?"    # full | normal | memory
    wait = "?"          # how a blocked consumer waits (shown in docs/performance.md and RESULTS.md)
    default = True      # False: runs only when --systems names it exactly
    mention_off = True  # list it as skipped when it is off (False: only issue 12's rows use it)

    def unavailable(self) -> str | None:
        """None when the system can run here, else why not (printed as a skip line)."""
        return None

    def version(self) -> str:
        return "?"

    def start(self, workdir: Path) -> None:
        self.workdir = workdir

    def stop(self) -> None:
        pass

    def client(self, *, setup: bool = False) -> Client:
        """``setup=True``: a client for filling a queue fast (durability normal)."""
        raise NotImplementedError

    def disk_bytes(self) -> int:
        return 0

    def server_pids(self) -> list[int]:
        return []

    def __repr__(self) -> str:
        return self.name


# --------------------------------------------------------------------------- sqlq


class SqlqClient(Client):
    """sqlq's public API on a file path or a ``postgresql://`` URL (durability: files only)."""

    def __init__(self, target: Path | str, durability: str | None = None) -> None:
        import sqlq

        opts = {"durability": durability} if durability else {}
        self.q = sqlq.Queue(str(target), **opts)

    def put(self, body: bytes) -> None:
        self.q.put(body, tube=TUBE)

    def put_many(self, bodies: list[bytes]) -> None:
        self.q.put_many(bodies, tube=TUBE)

    def put_delayed_many(self, bodies: list[bytes]) -> None:
        self.q.put_many(bodies, tube=TUBE, delay=DELAY_S)

    def take(self, prev: object, timeout: float) -> object | None:
        # The worker fast path: delete the previous job and claim the next in one
        # transaction (SPEC/internals: reserve(..., delete=job)).
        return self.q.reserve([TUBE], timeout=timeout, delete=prev)

    def finish(self, handle: object) -> None:
        handle.delete()  # type: ignore[attr-defined]

    def body(self, handle: object) -> bytes:
        return handle.body  # type: ignore[attr-defined,no-any-return]

    def close(self) -> None:
        self.q.close()


def sqlq_missing() -> str | None:
    """None when sqlq imports and has a Queue, else why not."""
    try:
        import sqlq
    except Exception as exc:  # noqa: BLE001 - any import failure means "not yet"
        return f"`import sqlq` failed ({type(exc).__name__}: {exc})"
    if not hasattr(sqlq, "Queue"):
        return "sqlq has no Queue yet"
    return None


class Sqlq(System):
    family = "sqlq"
    wait = "inotify (sqlq.wakeup)"

    def __init__(self, durability: str) -> None:
        self.durability = durability
        self.name = f"sqlq-{durability}"

    def unavailable(self) -> str | None:
        return sqlq_missing()

    def version(self) -> str:
        import apsw

        import sqlq

        return f"sqlq {getattr(sqlq, '__version__', '?')} (SQLite {apsw.sqlite_lib_version()})"

    def start(self, workdir: Path) -> None:
        super().start(workdir)
        self.path = workdir / "sqlq.db"

    def client(self, *, setup: bool = False) -> Client:
        return SqlqClient(self.path, "normal" if setup else self.durability)

    def disk_bytes(self) -> int:
        return _files_bytes(_sqlite_files(self.path))


class SqlqAsyncClient(Client):
    """sqlq.AsyncQueue, one awaited call at a time (``run_until_complete`` per verb): the
    Queue's cost plus the hop to the AsyncQueue's thread and back; a blocked take waits
    on the loop (the notifier's fd), holding no thread."""

    def __init__(self, path: Path, durability: str) -> None:
        import asyncio

        import sqlq

        self.loop = asyncio.new_event_loop()
        self.aq = sqlq.AsyncQueue(str(path), durability=durability)
        self.loop.run_until_complete(self.aq.open())

    def put(self, body: bytes) -> None:
        self.loop.run_until_complete(self.aq.put(body, tube=TUBE))

    def put_many(self, bodies: list[bytes]) -> None:
        self.loop.run_until_complete(self.aq.put_many(bodies, tube=TUBE))

    def put_delayed_many(self, bodies: list[bytes]) -> None:
        self.loop.run_until_complete(self.aq.put_many(bodies, tube=TUBE, delay=DELAY_S))

    def take(self, prev: object, timeout: float) -> object | None:
        return self.loop.run_until_complete(
            self.aq.reserve([TUBE], timeout=timeout, delete=prev))  # type: ignore[arg-type]

    def finish(self, handle: object) -> None:
        self.loop.run_until_complete(handle.delete())  # type: ignore[attr-defined]

    def body(self, handle: object) -> bytes:
        return handle.body  # type: ignore[attr-defined,no-any-return]

    def close(self) -> None:
        self.loop.run_until_complete(self.aq.close())
        self.loop.close()


class SqlqAsync(Sqlq):
    wait = "inotify fd on the event loop (sqlq.AsyncQueue)"

    def __init__(self, durability: str) -> None:
        super().__init__(durability)
        self.name = f"sqlq-async-{durability}"

    def unavailable(self) -> str | None:
        import sqlq

        return super().unavailable() or (None if hasattr(sqlq, "AsyncQueue")
                                         else "sqlq has no AsyncQueue yet")

    def client(self, *, setup: bool = False) -> Client:
        if setup:
            return SqlqClient(self.path, "normal")
        return SqlqAsyncClient(self.path, self.durability)


# ------------------------------------------------------------------ raw apsw floor

# The floor runs on sqlq's own schema: the file is created by sqlq (its migrations,
# in a child process), so rows, index entries and triggers cost what sqlq's cost,
# whatever the schema becomes; the floor differs only in the Python around the SQL.
# Where sqlq does not import, a copy of migration 0001's table stands in.
RAW_SCHEMA = """
CREATE TABLE IF NOT EXISTS sqlq_jobs (
    id INTEGER PRIMARY KEY AUTOINCREMENT, tube TEXT NOT NULL, priority INTEGER NOT NULL,
    state INTEGER NOT NULL, delay_until INTEGER, reserved_until INTEGER,
    ttr INTEGER NOT NULL, body BLOB NOT NULL, created_at INTEGER NOT NULL,
    reserves INTEGER NOT NULL DEFAULT 0, timeouts INTEGER NOT NULL DEFAULT 0,
    releases INTEGER NOT NULL DEFAULT 0, buries INTEGER NOT NULL DEFAULT 0,
    kicks INTEGER NOT NULL DEFAULT 0, lease INTEGER, owner TEXT, bury_reason TEXT,
    unique_key TEXT);
CREATE INDEX IF NOT EXISTS jobs_ready ON sqlq_jobs (tube, priority, id) WHERE state = 0;
CREATE INDEX IF NOT EXISTS jobs_delayed ON sqlq_jobs (tube, delay_until) WHERE state = 1;
CREATE INDEX IF NOT EXISTS jobs_reserved ON sqlq_jobs (reserved_until) WHERE state = 2;
CREATE INDEX IF NOT EXISTS jobs_buried ON sqlq_jobs (tube, id) WHERE state = 3;
CREATE UNIQUE INDEX IF NOT EXISTS jobs_unique ON sqlq_jobs (tube, unique_key)
    WHERE unique_key IS NOT NULL;
"""
RAW_INSERT = (
    "INSERT INTO sqlq_jobs (tube, priority, state, delay_until, ttr, body, created_at)"
    " VALUES (?, 1024, ?, ?, 60000, ?, ?)"
)
# The tube through (SELECT ?3), as sqlq's own claim binds it: a bare ?3 on an indexed
# column makes SQLite built with STAT4 prepare the statement again on every run once
# the file has statistics, which would make the floor slower than it needs to be.
RAW_CLAIM = """
UPDATE sqlq_jobs SET state = 2, reserved_until = ?1 + ttr, reserves = reserves + 1,
       lease = abs(random()), owner = ?2
 WHERE id = (SELECT id FROM sqlq_jobs WHERE state = 0 AND tube = (SELECT ?3)
             ORDER BY priority, id LIMIT 1)
RETURNING id, body, lease
"""
RAW_DELETE = "DELETE FROM sqlq_jobs WHERE id = ?"


def _record_statement() -> str | None:
    """sqlq's own statement for a deleted job's record (issue 39: its worker's delete
    writes it in the delete's transaction, queries.sql delete_leased_job; ?1 id, ?2 lease,
    ?3 now), so that the floor's delete does the same SQL as sqlq's; None where sqlq does
    not import (the stand-in schema has no records)."""
    if sqlq_missing() is not None:
        return None
    try:
        from sqlq.backends.sqlite.store import Q
    except ImportError:
        return None
    return Q.get("delete_leased_job")

# The least a queue with reservations needs: an id, a state, a lease deadline, the
# body, and the ready jobs in order. Against the floor above it says what sqlq's
# schema itself costs (its columns, partial indexes and never-reused ids).
MINIMAL_SCHEMA = """
CREATE TABLE IF NOT EXISTS q (id INTEGER PRIMARY KEY, state INTEGER NOT NULL,
                              reserved_until INTEGER, body BLOB NOT NULL);
CREATE INDEX IF NOT EXISTS q_ready ON q (id) WHERE state = 0;
"""
MINIMAL_INSERT = "INSERT INTO q (state, reserved_until, body) VALUES (?, ?, ?)"
MINIMAL_CLAIM = """
UPDATE q SET state = 2, reserved_until = ? + 60000
 WHERE id = (SELECT id FROM q WHERE state = 0 ORDER BY id LIMIT 1)
RETURNING id, body
"""
MINIMAL_DELETE = "DELETE FROM q WHERE id = ?"


def _page_size_pragma() -> str:
    """The page size sqlq gives the files it makes, for the floor's own files: the
    schema's cost (rows 7c, 7d, 7g, 7h) is then the schema's, not the page's."""
    try:
        from sqlq.backends.sqlite.db import PAGE_SIZE
    except ImportError:  # a tree from before db.PAGE_SIZE: SQLite's default
        return "PRAGMA page_size = 4096"
    return f"PRAGMA page_size = {PAGE_SIZE}"


def _sqlq_schema(path: Path) -> None:
    """Create sqlq's schema in ``path`` in a forked child (the orchestrator opens no
    database itself: no connection or inotify watch may cross a later fork)."""
    import multiprocessing as mp

    def make() -> None:
        import sqlq

        sqlq.Queue(str(path)).close()

    child = mp.get_context("fork").Process(target=make)
    child.start()
    child.join(60)
    if child.exitcode != 0:
        raise RuntimeError(f"creating sqlq's schema in {path} failed (exit {child.exitcode})")


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


def _fine_busy(tries: int) -> bool:
    time.sleep(0.00005)
    return tries < 100_000


class DirWatch:
    """Wake on any write in a directory (inotify), for the raw loop's blocking take.

    Falls back to a 5 ms poll where there is no inotify.
    """

    def __init__(self, directory: Path) -> None:
        from sqlq.backends.sqlite.inotify import Flags, INotify

        try:
            self.ino: INotify | None = INotify()
        except OSError:
            self.ino = None
            return
        self.ino.add_watch(str(directory), Flags.MODIFY | Flags.CREATE | Flags.MOVED_TO
                           | Flags.CLOSE_WRITE)

    def wait(self, timeout: float) -> None:
        if self.ino is None:
            time.sleep(min(timeout, 0.005))
            return
        r, _, _ = select.select([self.ino.fileno()], [], [], max(0.0, timeout))
        if r:
            with contextlib.suppress(BlockingIOError):
                while len(os.read(self.ino.fileno(), 65536)) > 65536 - 272:
                    pass  # full: read on

    def close(self) -> None:
        if self.ino is not None:
            self.ino.close()


class RawClient(Client):
    insert, claim, delete = RAW_INSERT, RAW_CLAIM, RAW_DELETE

    def __init__(self, path: Path, durability: str) -> None:
        import apsw

        #: sqlq's record of a deleted job, written before each delete (None: none).
        self.record = self.record_statement()
        self.conn = apsw.Connection(str(path))
        self.conn.setbusytimeout(10_000)
        self.conn.execute("PRAGMA journal_mode=WAL")
        self.conn.execute(f"PRAGMA synchronous={'FULL' if durability == 'full' else 'NORMAL'}")
        self.owner = str(os.getpid())
        self.watch: DirWatch | None = None
        self.dir = path.parent

    def row(self, state: int, delay_until: int | None, body: bytes, now: int) -> tuple[object, ...]:
        """The INSERT's parameters."""
        return (TUBE, state, delay_until, body, now)

    def claim_args(self) -> tuple[object, ...]:
        return (_now_ms(), self.owner, TUBE)

    def put(self, body: bytes) -> None:
        self.conn.execute(self.insert, self.row(0, None, body, _now_ms()))

    def put_many(self, bodies: list[bytes], state: int = 0, delay_until: int | None = None) -> None:
        now = _now_ms()
        with self.conn:
            self.conn.executemany(self.insert, [self.row(state, delay_until, b, now)
                                                for b in bodies])

    def put_delayed_many(self, bodies: list[bytes]) -> None:
        self.put_many(bodies, 1, _now_ms() + DELAY_S * 1000)

    def record_statement(self) -> str | None:
        return _record_statement()

    def _delete(self, handle: Any) -> None:
        """The job's record, then the job, inside the caller's transaction."""
        if self.record is not None:
            self.conn.execute(self.record, (handle[0], handle[2], _now_ms()))
        self.conn.execute(self.delete, (handle[0],))

    def _claim(self, prev: object) -> object | None:
        self.conn.execute("BEGIN IMMEDIATE")
        try:
            if prev is not None:
                self._delete(prev)
            row = self.conn.execute(self.claim, self.claim_args()).fetchone()
        except BaseException:
            self.conn.execute("ROLLBACK")
            raise
        self.conn.execute("COMMIT")
        return row

    def take(self, prev: object, timeout: float) -> object | None:
        row = self._claim(prev)
        if row is not None or timeout <= 0:
            return row
        if self.watch is None:
            self.watch = DirWatch(self.dir)
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            self.watch.wait(min(left, 1.0))  # a write in the directory, or 1 s
            # The -wal write fires before the writer's fsync and before its commit is
            # visible. Take the write lock with a fine-grained busy handler (50 us
            # steps instead of SQLite's 1, 2, 5, 10 ms sleeps): once we hold it, the
            # writer has committed and its job is visible.
            self.conn.setbusyhandler(_fine_busy)
            try:
                row = self._claim(None)
            finally:
                self.conn.setbusytimeout(10_000)
            if row is not None:
                return row

    def finish(self, handle: object) -> None:
        if self.record is None:
            self.conn.execute(self.delete, (handle[0],))  # type: ignore[index]
            return
        self.conn.execute("BEGIN IMMEDIATE")
        try:
            self._delete(handle)
        except BaseException:
            self.conn.execute("ROLLBACK")
            raise
        self.conn.execute("COMMIT")

    def body(self, handle: object) -> bytes:
        return handle[1]  # type: ignore[index,no-any-return]

    def close(self) -> None:
        if self.watch is not None:
            self.watch.close()
        self.conn.close()


class Raw(System):
    family = "raw"
    wait = "inotify on the directory, then the write lock with a 50 µs busy handler"

    def __init__(self, durability: str) -> None:
        self.durability = durability
        self.name = f"raw-{durability}"

    def unavailable(self) -> str | None:
        try:
            import apsw  # noqa: F401
        except ImportError:
            return "apsw is not installed"
        return None

    def version(self) -> str:
        import apsw

        return f"apsw {apsw.apsw_version()} (SQLite {apsw.sqlite_lib_version()})"

    def start(self, workdir: Path) -> None:
        import apsw

        super().start(workdir)
        self.path = workdir / "raw.db"
        if sqlq_missing() is None:
            _sqlq_schema(self.path)
            return
        conn = apsw.Connection(str(self.path))
        conn.execute(_page_size_pragma())
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute(RAW_SCHEMA)
        conn.close()

    def client(self, *, setup: bool = False) -> Client:
        return RawClient(self.path, "normal" if setup else self.durability)

    def disk_bytes(self) -> int:
        return _files_bytes(_sqlite_files(self.path))


class MinimalClient(RawClient):
    insert, claim, delete = MINIMAL_INSERT, MINIMAL_CLAIM, MINIMAL_DELETE

    def record_statement(self) -> str | None:
        return None  # the least a queue needs: no record of finished jobs

    def row(self, state: int, delay_until: int | None, body: bytes, now: int) -> tuple[object, ...]:
        return (state, delay_until, body)

    def claim_args(self) -> tuple[object, ...]:
        return (_now_ms(),)


class RawMinimal(Raw):
    """The raw loop on the minimal schema (MINIMAL_SCHEMA): what sqlq's schema costs.

    Off by default: the issue 12 rows (targets.py) use it."""

    default = False
    mention_off = False

    def __init__(self, durability: str) -> None:
        super().__init__(durability)
        self.name = f"raw-minimal-{durability}"

    def start(self, workdir: Path) -> None:
        import apsw

        System.start(self, workdir)
        self.path = workdir / "minimal.db"
        conn = apsw.Connection(str(self.path))
        conn.execute(_page_size_pragma())
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute(MINIMAL_SCHEMA)
        conn.close()

    def client(self, *, setup: bool = False) -> Client:
        return MinimalClient(self.path, "normal" if setup else self.durability)
