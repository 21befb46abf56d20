"""Which backend serves what: a location (:func:`open_backend`), or an application's own
DB-API connection (:func:`for_connection`); and which files a location's backend keeps
(:func:`companions`).

The one module here that names every backend; the contract (``base.py``) names none.
Each backend is imported only when asked for, so a SQLite user never imports psycopg.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from ..core.extras import install_hint
from ..errors import DatabaseError
from .base import Backend, Durability
from .locations import check_scheme, is_url

if TYPE_CHECKING:
    from .store import Store

T = TypeVar("T")


def open_backend(location: str, *, durability: Durability = "full", init: bool = False,
                 clock: Callable[[], int], vfs: str | None = None,
                 driver: str | None = None) -> Backend:
    """The backend for a location: a ``postgresql://`` URL, else a SQLite file path.
    ``vfs`` and ``driver`` (the SQLite library) apply to a file only."""
    check_scheme(location)
    if is_url(location):
        if vfs is not None or driver is not None:
            raise ValueError("vfs and driver apply to SQLite files only")
        try:
            from .postgres import PostgresBackend
        except ImportError as e:
            if (e.name or "psycopg").partition(".")[0] not in ("psycopg", "psycopg_binary"):
                raise  # not the driver: sqlq's own bug
            raise _missing_driver(e) from e
        backend: Backend = PostgresBackend(location, durability=durability, init=init,
                                           clock=clock)
        return backend
    from .sqlite import SQLiteBackend

    return SQLiteBackend(location, durability=durability, init=init, clock=clock, vfs=vfs,
                         driver=driver)


def _missing_driver(error: ImportError) -> DatabaseError:
    """A one-line error naming the extra to install, for psycopg missing (or unusable:
    psycopg without its binary and no libpq on the machine)."""
    why = (str(error).strip().splitlines() or ["no psycopg"])[0].rstrip(".")
    return DatabaseError(f"a postgresql:// database needs psycopg 3 ({why}): "
                         f"{install_hint('postgres')}")


class ConnectionBackend(Protocol):
    """What a backend offers for an application's own connection (``sqlq.put(conn)``,
    the framework integrations): a module, ``sqlite/sqlite3_put.py`` or
    ``postgres/psycopg_put.py``."""

    @property
    def STORE(self) -> Store[Any]:
        """The backend's verbs, run on the application's connection."""

    def run(self, conn: Any, fn: Callable[[Any], T]) -> T:
        """Run fn on conn in the caller's transaction (or one of its own if conn
        autocommits); sqlq never commits a transaction it did not open."""

    def same_database(self, conn: Any, location: str) -> bool:
        """Whether conn reads and writes the database at location (a Queue's path or
        URL)."""


def _driver_of(conn: Any) -> str:
    """The top-level module of conn's class or of a class it derives from (a
    framework's subclass of ``sqlite3.Connection`` or ``psycopg.Connection``), among
    the drivers sqlq knows; "" if none. Read from the class, so nothing is imported."""
    for cls in type(conn).__mro__:
        driver = cls.__module__.partition(".")[0]
        if driver in ("sqlite3", "psycopg"):
            return driver
    return ""


def for_connection(conn: Any) -> ConnectionBackend:
    """The backend for an application's DB-API connection: Python's ``sqlite3`` for a
    SQLite file, psycopg 3 for PostgreSQL.

    Raises:
        TypeError: conn is neither.
    """
    driver = _driver_of(conn)
    if driver == "sqlite3":
        from .sqlite import sqlite3_put

        return sqlite3_put
    if driver == "psycopg":
        from .postgres import psycopg_put

        return psycopg_put
    raise TypeError("conn must be a sqlite3.Connection or a psycopg.Connection, "
                    f"not {type(conn).__name__}")


def companions(location: str) -> list[tuple[str, str]]:
    """The paths a SQLite file at ``location`` owns, each as ``locations.identity`` spells
    it, with what it is: the file, the -wal, -shm and -journal files SQLite keeps beside it,
    and sqlq's ``<db>-sqlq`` directory (owner files, wakeups). None for a server URL.
    Whatever writes files (``backup``) must replace none of them: a replaced -wal loses
    the commits it holds."""
    if is_url(location):
        return []
    from .sqlite.sidecar import SUFFIX, real_path, sidecar_dir

    real = real_path(location)
    return [(real, "file"), *((real + s, f"{s} file") for s in ("-wal", "-shm", "-journal")),
            (sidecar_dir(real), f"{SUFFIX} directory")]
