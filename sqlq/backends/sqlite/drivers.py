"""The two SQLite libraries a :class:`~.db.Database` can talk through.

* ``apsw`` (the default): apsw's own copy of SQLite, newer than most systems';
* ``sqlite3``: Python's ``sqlite3`` module, the system's SQLite. An application
  that uses ``sqlite3`` itself opens its Queue with ``driver="sqlite3"``, so that
  one SQLite library holds every lock on the file in the process (see db.py).

A driver opens a connection that answers to the part of apsw's Connection that
sqlq uses (``execute``, ``executemany``, ``cursor``, ``last_insert_rowid``, ``changes``,
``get_autocommit``, ``set_busy_handler``, ``close``), and names a failure's
SQLite result code, from which db.py makes sqlq's errors. The transaction logic,
busy fairness, durability and wakeup live once, in db.py, for both.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

import apsw

from ...errors import DatabaseError
from ..conn import Conn
from ..conn import Rows as ConnRows

if TYPE_CHECKING:
    import sqlite3

T = TypeVar("T")

#: SQLite's primary result code for "another connection holds the lock".
SQLITE_BUSY = 5
#: The -shm file (WAL mode's index) could not grow: the unix VFS's word for a disk with
#: no room for it (not SQLITE_FULL); db.translate says the disk is full.
SQLITE_IOERR_SHMSIZE = 10 | 19 << 8
#: RETURNING, which queries.sql uses, arrived in SQLite 3.35.
MIN_SQLITE = (3, 35, 0)


class Driver:
    """One SQLite library: how to open a file, and how to read its errors."""

    name: str
    #: The base class of the library's errors.
    Error: type[Exception]

    def connect(self, path: str, *, create: bool = False, vfs: str | None = None) -> Any:
        raise NotImplementedError

    def code(self, error: BaseException) -> int:
        """The primary SQLite result code of one of the library's errors, -1 if none."""
        code = self.extended_code(error)
        return -1 if code < 0 else code & 0xFF

    def extended_code(self, error: BaseException) -> int:
        """Its extended result code (the primary one where the library has no other),
        -1 if none: what says, of an I/O error, which one (db.translate)."""
        raise NotImplementedError

    def busy(self, error: BaseException) -> bool:
        return isinstance(error, self.Error) and self.code(error) == SQLITE_BUSY


class ApswConnection(apsw.Connection):
    """An apsw connection with one cursor kept for the hot path's statements.

    ``Connection.execute`` makes a cursor for every statement and frees it after (its
    allocation, its registration with the connection and its removal: about 2k
    instructions a statement, bench_callgrind.py). ``hot.execute`` runs on one cursor
    instead, for statements whose rows the caller reads to the end (or needs none of)
    before the next: the claims, the worker's delete, the due cache's data_version,
    BEGIN and COMMIT. A new statement on it ends the one before, so nothing that is
    read lazily, or by code that may run another statement meanwhile, goes there.
    """

    __slots__ = ("hot",)

    def __init__(self, path: str, flags: int, vfs: str | None) -> None:
        super().__init__(path, flags=flags, vfs=vfs)
        self.hot = self.cursor()


def end_hot(conn: Any) -> None:
    """End the statement an exception left on conn's kept cursor (between its execute
    and the read of its rows), as a dropped cursor's ends: an autocommit write commits
    and lets the write lock go, rather than holding it until the next statement there."""
    if isinstance(conn, ApswConnection):
        conn.hot.close(force=True)
        conn.hot = conn.cursor()


class Apsw(Driver):
    name = "apsw"
    Error = apsw.Error

    def connect(self, path: str, *, create: bool = False, vfs: str | None = None) -> Any:
        flags = apsw.SQLITE_OPEN_READWRITE | (apsw.SQLITE_OPEN_CREATE if create else 0)
        return ApswConnection(path, flags, vfs)

    def extended_code(self, error: BaseException) -> int:
        code = getattr(error, "extendedresult", -1)
        if code is None or code < 0:
            code = getattr(error, "result", -1)
        return -1 if code is None or code < 0 else int(code)


class _Sqlite3Error:
    """``sqlite3.Error``, read on first use: Python's sqlite3 is imported only by a
    process that uses this driver or asks for its errors' class."""

    def __get__(self, obj: object, owner: type | None = None) -> type[Exception]:
        import sqlite3

        return sqlite3.Error


class Sqlite3(Driver):
    name = "sqlite3"
    Error = _Sqlite3Error()

    def connect(self, path: str, *, create: bool = False, vfs: str | None = None) -> Any:
        import sqlite3
        from urllib.parse import quote

        uri = f"file:{quote(os.path.abspath(path))}?mode={'rwc' if create else 'rw'}"
        if vfs is not None:
            uri += f"&vfs={quote(vfs)}"
        # isolation_level=None: no implicit BEGIN, db.py opens every transaction;
        # timeout=0: SQLITE_BUSY comes back at once, for Connection's busy handler.
        conn = sqlite3.connect(uri, uri=True, timeout=0, isolation_level=None,
                               check_same_thread=False)
        return Connection(conn)

    def extended_code(self, error: BaseException) -> int:
        code = getattr(error, "sqlite_errorcode", None)  # Python 3.11+: extended
        if code is None:  # Python 3.10, or an error not from SQLite (misuse)
            message = str(error)
            return next((c for text, c in _ERRSTR.items() if message.startswith(text)), -1)
        return int(code)


#: sqlite3_errstr()'s messages of the codes db.translate() names, for Python 3.10,
#: whose sqlite3 errors carry no code.
_ERRSTR = {"database is locked": SQLITE_BUSY, "attempt to write a readonly database": 8,
           "disk I/O error": 10, "database disk image is malformed": 11,
           "database or disk is full": 13, "unable to open database file": 14,
           "file is not a database": 26}


DRIVERS: dict[str, Driver] = {d.name: d for d in (Apsw(), Sqlite3())}


#: The driver of a Queue opened without one, if set: e.g. for an application's
#: worker processes (``sqlq work``), or a test suite run through sqlite3.
DRIVER_ENV = "SQLQ_SQLITE_DRIVER"


def get(name: str | None) -> Driver:
    """The driver of that name (None: $SQLQ_SQLITE_DRIVER, else apsw)."""
    what = "driver"
    if name is None:
        name, what = os.environ.get(DRIVER_ENV) or "apsw", DRIVER_ENV
    if name not in DRIVERS:
        raise ValueError(f"{what} must be one of {', '.join(map(repr, DRIVERS))}, not {name!r}")
    if name == "sqlite3":
        check_version()  # before a file is made
    return DRIVERS[name]


def check_version() -> None:
    import sqlite3

    if sqlite3.sqlite_version_info < MIN_SQLITE:
        raise DatabaseError(f"Python's sqlite3 uses SQLite {sqlite3.sqlite_version}; sqlq needs "
                            f"{'.'.join(map(str, MIN_SQLITE))} or newer (use the apsw driver)")


def statements(script: str) -> Iterator[str]:
    """The statements of a script, each whole (a trigger's body keeps its semicolons)."""
    pending = ""
    for piece in script.split(";"):
        pending += piece + ";"
        if apsw.complete(pending):
            if pending.strip(" \t\n;"):
                yield pending
            pending = ""
    if pending.strip(" \t\n;"):
        yield pending


class Rows:
    """A finished statement's rows. Fetching them all at once steps the statement to
    its end, so no half-read INSERT ... RETURNING keeps a COMMIT waiting."""

    def __init__(self, rows: list[Any]) -> None:
        self._rows = iter(rows)

    def fetchone(self) -> Any:
        return next(self._rows, None)

    def fetchall(self) -> list[Any]:
        return list(self._rows)

    def __iter__(self) -> Iterator[Any]:
        return self._rows


class Connection:
    """The part of an apsw connection that sqlq uses, over a sqlite3 connection
    (the driver's own, or the application's in ``sqlq.put(conn)``).

    Rows come back as plain tuples whatever ``row_factory`` the caller set.
    Python's sqlite3 has no busy handler of its own but a timeout; a handler set
    here is called as SQLite would call it, each time a statement meets
    SQLITE_BUSY, and the statement is run again while it says so (a statement
    that fails with SQLITE_BUSY has changed nothing).
    """

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn
        self._busy: Callable[[int], bool] | None = None
        #: ApswConnection.hot's statements: each runs on a cursor of its own here.
        self.hot = self

    def set_busy_handler(self, handler: Callable[[int], bool] | None) -> None:
        self._busy = handler

    def _run(self, step: Callable[[sqlite3.Cursor], T]) -> T:
        import sqlite3  # loaded by the connect that made this connection

        attempts = 0
        while True:
            cursor = self.conn.cursor()
            cursor.row_factory = None
            try:
                return step(cursor)
            except sqlite3.OperationalError as e:
                if (self._busy is None or DRIVERS["sqlite3"].code(e) != SQLITE_BUSY
                        or not self._busy(attempts)):
                    raise
                attempts += 1
            finally:
                cursor.close()

    def execute(self, sql: str, params: Any = ()) -> Rows:
        import sqlite3

        def step(cursor: sqlite3.Cursor) -> Rows:
            try:
                cursor.execute(sql, params)
            except sqlite3.ProgrammingError as e:
                # apsw runs a script (a migration) in one execute. sqlite3's executescript
                # would COMMIT the transaction it belongs in first: one statement at a time.
                if params or "one statement" not in str(e):
                    raise
                for statement in statements(sql):
                    cursor.execute(statement)
            return Rows(cursor.fetchall())
        return self._run(step)

    def executemany(self, sql: str, seq_of_params: Iterable[Any]) -> None:
        self._run(lambda cursor: cursor.executemany(sql, seq_of_params))

    def cursor(self) -> Connection:
        """The shared Store calls ``conn.cursor().executemany``, as psycopg needs."""
        return self

    def last_insert_rowid(self) -> int:
        return int(self.execute("SELECT last_insert_rowid()").fetchall()[0][0])

    def changes(self) -> int:
        """Rows the last statement changed (its triggers' not counted), as apsw's."""
        return int(self.execute("SELECT changes()").fetchall()[0][0])

    def get_autocommit(self) -> bool:
        return not self.conn.in_transaction

    def close(self) -> None:
        self.conn.close()


class immediate:  # noqa: N801 - used as a function: ``with immediate(conn):``
    """``with immediate(conn):`` runs the block in a write transaction: BEGIN IMMEDIATE
    (through ``begin`` if given, e.g. a retry loop around it), COMMIT after the block,
    ROLLBACK if the block or the COMMIT raised while a transaction is still open.
    ``commit=False`` leaves the transaction open for its owner when the block succeeds
    (``sqlq.put`` on a legacy-mode sqlite3 connection).

    IMMEDIATE takes the write lock at BEGIN, so a statement inside cannot fail half-way
    for want of it. A class, not a generator (``contextlib.contextmanager`` costs about
    1.4 us more a block); ``db.Database._transaction``, once a job on a worker's path,
    writes the same lines out.
    """

    __slots__ = ("_commit", "_conn")

    def __init__(self, conn: Any, *, begin: Callable[[], object] | None = None,
                 commit: bool = True) -> None:
        if begin is None:
            conn.execute("BEGIN IMMEDIATE")
        else:
            begin()
        self._conn = conn
        self._commit = commit

    def __enter__(self) -> Any:
        return self._conn

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 tb: object) -> None:
        conn = self._conn
        if kind is None and self._commit:
            try:
                conn.execute("COMMIT")
            except BaseException:
                if not conn.get_autocommit():
                    conn.execute("ROLLBACK")
                raise
        elif kind is not None and not conn.get_autocommit():
            conn.execute("ROLLBACK")


@contextlib.contextmanager
def triggers_off(conn: Any) -> Iterator[bool]:
    """Inside, no trigger fires on conn, if its library can say so (apsw; True), for a
    batch that does itself what a per-row trigger would (each firing costs a row
    about 13k instructions: half of what the insert costs). Per connection, not
    saved in the file; sqlite3_db_config expires conn's prepared statements, which
    are prepared again at their next use: worth it for batches, not for one row."""
    if not isinstance(conn, apsw.Connection):
        yield False
        return
    was = conn.config(apsw.SQLITE_DBCONFIG_ENABLE_TRIGGER, -1)  # -1: only asks
    conn.config(apsw.SQLITE_DBCONFIG_ENABLE_TRIGGER, 0)
    try:
        yield True
    finally:
        conn.config(apsw.SQLITE_DBCONFIG_ENABLE_TRIGGER, was)


class Statements(Protocol):
    """Where ``SqliteConn.hot`` runs a statement: apsw's kept cursor, or the sqlite3
    driver's connection itself."""

    def execute(self, sql: str, params: Any = ..., /) -> ConnRows: ...


class SqliteConn(Conn, Protocol):
    """What the SQLite store uses of either driver's connection, beyond ``Conn``."""

    @property
    def hot(self) -> Statements: ...

    def executemany(self, sql: str, params: Iterable[Any], /) -> object: ...

    def last_insert_rowid(self) -> int: ...

    def changes(self) -> int: ...

    def get_autocommit(self) -> bool: ...


if TYPE_CHECKING:
    def _connections_are_conns(a: ApswConnection, s: Connection) -> list[SqliteConn]:
        """mypy's proof that both drivers' connections offer what SqliteConn says."""
        return [a, s]


__all__ = ["DRIVERS", "MIN_SQLITE", "ApswConnection", "Connection", "Driver", "Rows",
           "SqliteConn", "check_version", "end_hot", "get", "immediate", "triggers_off"]
