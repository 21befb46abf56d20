"""A backend's connection as the storage code speaks to it: the protocols every driver's
connection meets (apsw's, Python's sqlite3 behind ``sqlite/drivers.Connection``,
psycopg's). Nothing of sqlq here, so the SQL helpers (``sql.py``), the Store and group
commit (``group.py``) name a connection without importing the contract (``base.py``)
that holds them."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any, Protocol, TypeVar


class Rows(Protocol):
    """A statement's result, as every driver's cursor gives it: its rows are tuples of
    SQL values (or the driver's tuple-like rows)."""

    def fetchone(self) -> Any: ...

    def fetchall(self) -> list[Any]: ...

    def __iter__(self) -> Iterator[Any]: ...


class Cursor(Protocol):
    def executemany(self, sql: str, params: Iterable[Any], /) -> object: ...


class Conn(Protocol):
    """A backend's connection, inside a transaction: what every backend's connection
    offers (each driver module checks its own against this) and the shared Store uses.
    Opaque above the seam: only the backend's Store and the application's own SQL
    (Transaction.execute, through ``Backend.execute_app``) use it. Parameters are
    the dialect's: a dict by name, or a tuple by position (``store.py``)."""

    def execute(self, sql: str, params: Any = ..., /) -> Rows: ...

    def cursor(self) -> Cursor: ...


#: A noun store's connection type (``store/``): ``Conn`` in the shared nouns, each
#: dialect's own in its subclasses, so that mypy checks the dialect code against what
#: its driver's connection really offers (``conn.hot``, ``conn.changes()``, psycopg's
#: ``transaction()``), not against ``Any``.
ConnT = TypeVar("ConnT", bound=Conn)
