"""Where a Flask app's queue lives, and whether it shares the app's SQLAlchemy database.

The queue shares the application's database when ``SQLQ_DB`` is unset (the queue is
then the database of ``SQLALCHEMY_DATABASE_URI``) or names the same database (asked
of a connection, by ``sqlq.contrib._shared.same_database``, as Django's side does).
Only then can a put join the session's transaction, through the session's own
DB-API connection: Python's ``sqlite3`` for a file, psycopg 3 for PostgreSQL
(``sqlq.put`` knows no other driver). Anything else is a separate queue, whose puts
wait for the session's commit.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ...backends import is_url
from ...errors import Error
from .._shared import same_database

#: The DB-API drivers whose connections ``sqlq.put(conn)`` can write through.
JOINABLE = {"sqlite": "pysqlite", "postgresql": "psycopg"}


@dataclass(frozen=True)
class Settings:
    """What the extension opens for one app.

    Attributes:
        location: the queue's file path or ``postgresql://`` URL.
        shared: True if that is the app's SQLAlchemy database (puts join its session).
        sqlite_file: True for a SQLite file (False for PostgreSQL).
        options: keywords for ``sqlq.Queue`` (``SQLQ_OPTIONS``).
    """

    location: str
    shared: bool
    sqlite_file: bool
    options: dict[str, Any]


def queue_location(url: Any) -> str | None:
    """The sqlq location of an SQLAlchemy URL (a file path or a libpq URL), or None
    when sqlq cannot use that database (an in-memory SQLite, MySQL, ...)."""
    backend = url.get_backend_name()
    if backend == "sqlite":
        database = url.database
        return None if not database or database == ":memory:" or \
            database.startswith("file:") else str(database)
    if backend == "postgresql":
        return str(url.set(drivername="postgresql").render_as_string(hide_password=False))
    return None


def resolve(config: Any, engine: Any | None) -> Settings:
    """The Settings of an app, from its config and its SQLAlchemy engine (None without
    Flask-SQLAlchemy).

    With ``SQLQ_DB`` set, whether it names the app's database is asked of a connection
    of the engine (:func:`sqlq.contrib._shared.same_database`: the same file however
    spelled, the same PostgreSQL database whatever the user or password).

    Raises:
        sqlq.Error: no database to use, or a shared one that sqlq cannot join.
    """
    options = dict(config.get("SQLQ_OPTIONS") or {})
    configured = config.get("SQLQ_DB")
    url = None if engine is None else engine.url
    if configured:
        location = str(configured)
        shared = False
        if engine is not None:
            with engine.connect() as conn:
                shared = same_database(location, conn.connection.dbapi_connection)
        return Settings(location, shared, not is_url(location), options)
    if url is None:
        raise Error("set SQLQ_DB (a file path or a postgresql:// URL) in the app's config, "
                    "or configure Flask-SQLAlchemy first: the queue then shares its database")
    app_location = queue_location(url)
    if app_location is None:
        raise Error(f"sqlq cannot keep its jobs in {url.render_as_string()}: set SQLQ_DB "
                    "to a file path or a postgresql:// URL")
    backend, driver = url.get_backend_name(), url.get_driver_name()
    if JOINABLE.get(backend) != driver:
        raise Error(f"the queue shares the app's database, but its SQLAlchemy driver "
                    f"{backend}+{driver} cannot carry sqlq's puts: use "
                    f"{backend}+{JOINABLE.get(backend)}, or a separate SQLQ_DB")
    return Settings(app_location, True, not is_url(app_location), options)


__all__ = ["JOINABLE", "Settings", "queue_location", "resolve"]
