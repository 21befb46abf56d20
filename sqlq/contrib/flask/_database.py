"""Where a Flask app's queue lives, and whether it shares the app's SQLAlchemy database.

The queue shares the application's database when ``SQLQ_DB`` is unset (the queue is
then the database of ``SQLALCHEMY_DATABASE_URI``) or names the same database. Only
then can a put join the session's transaction, through the session's own DB-API
connection: Python's ``sqlite3`` for a file, psycopg 3 for PostgreSQL (``sqlq.put``
knows no other driver). Anything else is a separate queue, whose puts wait for the
session's commit.

(What Django's integration needs is the same question: ``same_database`` and
``queue_location`` are written so the lead can fold them into ``sqlq/contrib/_shared.py``,
which did not exist when this was written.)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ...backends import identity, is_url
from ...errors import Error

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


def _pg_key(location: str) -> tuple[str, int, str]:
    from sqlalchemy.engine import make_url

    url = make_url(location)
    host = url.host or str(url.query.get("host") or "localhost")
    return host, int(url.port or 5432), str(url.database or url.username or "")


def same_database(app_location: str | None, queue_location: str) -> bool:
    """True if the queue's location names the app's database (however spelled: a
    relative path, a symlink, a URL with another user or password)."""
    if app_location is None or is_url(app_location) != is_url(queue_location):
        return False
    if is_url(queue_location):
        return _pg_key(app_location) == _pg_key(queue_location)
    return identity(app_location) == identity(queue_location)


def resolve(config: Any, engine_url: Any | None) -> Settings:
    """The Settings of an app, from its config and its SQLAlchemy engine's URL (None
    without Flask-SQLAlchemy).

    Raises:
        sqlq.Error: no database to use, or a shared one that sqlq cannot join.
    """
    options = dict(config.get("SQLQ_OPTIONS") or {})
    configured = config.get("SQLQ_DB")
    app_location = None if engine_url is None else queue_location(engine_url)
    if configured:
        location = str(configured)
    elif app_location is not None:
        location = app_location
    elif engine_url is not None:
        raise Error(f"sqlq cannot keep its jobs in {engine_url.render_as_string()}: set "
                    "SQLQ_DB to a file path or a postgresql:// URL")
    else:
        raise Error("set SQLQ_DB (a file path or a postgresql:// URL) in the app's config, "
                    "or configure Flask-SQLAlchemy first: the queue then shares its database")
    shared = same_database(app_location, location)
    if shared and engine_url is not None:
        backend, driver = engine_url.get_backend_name(), engine_url.get_driver_name()
        if JOINABLE.get(backend) != driver:
            raise Error(f"the queue shares the app's database, but its SQLAlchemy driver "
                        f"{backend}+{driver} cannot carry sqlq's puts: use "
                        f"{backend}+{JOINABLE.get(backend)}, or a separate SQLQ_DB")
    return Settings(location, shared, not is_url(location), options)


__all__ = ["JOINABLE", "Settings", "queue_location", "resolve", "same_database"]
