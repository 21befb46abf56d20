"""``settings.SQLQ``: where the queue lives, read once and checked.

Two shapes, one key each::

    SQLQ = {"DATABASE": "default"}        # share Django's database of that alias
    SQLQ = {"DB": "var/jobs.db"}          # a queue database of its own (file or URL)

``DATABASE`` (the default when ``SQLQ`` is absent) puts sqlq's tables in that
Django database, SQLite or PostgreSQL, so a put inside ``transaction.atomic()``
commits or rolls back with the request's rows. ``DB`` keeps jobs apart; a put
inside ``atomic()`` then waits for Django's commit (see ``_shared.py``). A ``DB``
that names the file or database of a Django alias is that alias's database,
shared. ``OPTIONS`` passes ``durability``, ``max_job_size`` and ``result_ttl``
to the Queue. Every mistake is one ``ImproperlyConfigured`` line naming the key.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.db import DEFAULT_DB_ALIAS, connections

from ...backends import identity, is_url
from ...model import DEFAULT_MAX_JOB_SIZE

KEYS = ("DB", "DATABASE", "OPTIONS")
QUEUE_OPTIONS = ("durability", "max_job_size", "result_ttl")
_ENGINES = {"django.db.backends.sqlite3": "sqlite", "django.db.backends.postgresql": "postgres"}


@dataclass(frozen=True)
class Config:
    """Where the queue is, read from ``settings.SQLQ``.

    Attributes:
        location: the Queue's file path or ``postgresql://`` URL (with any password).
        alias: the Django database the queue shares, or None for a queue of its own.
        sqlite3: the process must open the file through Python's ``sqlite3``: Django's
            SQLite backend has it open too (one SQLite library per process and file).
        options: keyword arguments for ``sqlq.Queue``.
        password: a PostgreSQL password, kept out of command lines (``PGPASSWORD``).
    """

    location: str
    alias: str | None
    sqlite3: bool = False
    options: dict[str, Any] = field(default_factory=dict)
    password: str | None = None

    @property
    def max_job_size(self) -> int:
        """The largest body a put accepts (``OPTIONS["max_job_size"]``, else 1 MiB)."""
        return int(self.options.get("max_job_size", DEFAULT_MAX_JOB_SIZE))

    @property
    def queue_kwargs(self) -> dict[str, Any]:
        """``sqlq.Queue(location, **queue_kwargs)``: the options, the driver, and
        ``init`` for a Django database that has not met sqlq yet."""
        kwargs = dict(self.options)
        if self.sqlite3:
            kwargs["driver"] = "sqlite3"
        if self.alias is not None:
            kwargs["init"] = True
        return kwargs

    def child_location(self) -> str:
        """The location to hand a child process: a URL without its password."""
        if self.password is None:
            return self.location
        return self.location.replace(":" + quote(self.password, safe="") + "@", "@", 1)


def _fail(message: str) -> ImproperlyConfigured:
    return ImproperlyConfigured(f"settings.SQLQ: {message}")


def read() -> Config:
    """The configuration in ``settings.SQLQ`` (checked), against Django's databases as
    they are now (a test run's test database included)."""
    raw = getattr(settings, "SQLQ", None)
    if raw is None:
        raw = {"DATABASE": DEFAULT_DB_ALIAS}
    if not isinstance(raw, dict):
        raise _fail(f"must be a dict such as {{'DB': 'jobs.db'}}, not {type(raw).__name__}")
    unknown = sorted(set(raw) - set(KEYS))
    if unknown:
        raise _fail(f"unknown key {unknown[0]!r} (known: {', '.join(KEYS)})")
    options = _options(raw.get("OPTIONS", {}))
    if ("DB" in raw) == ("DATABASE" in raw):
        raise _fail("give either 'DB' (the queue's own file or URL) or 'DATABASE' "
                    "(a Django database alias to share), not both or neither")
    if "DATABASE" in raw:
        return _shared(raw["DATABASE"], options)
    db = raw["DB"]
    if not isinstance(db, (str, os.PathLike)) or not os.fspath(db):
        raise _fail(f"'DB' must be a file path or a postgresql:// URL, not {db!r}")
    location = os.fspath(db)
    for alias in connections:  # the file or database of a Django alias: shared, then
        found = _alias_location(alias, strict=False)
        if found is not None and identity(found[0]) == identity(location):
            return _shared(alias, options)
    return Config(location, None, options=options)


def _options(options: Any) -> dict[str, Any]:
    if not isinstance(options, dict):
        raise _fail(f"'OPTIONS' must be a dict, not {type(options).__name__}")
    for key in options:
        if key not in QUEUE_OPTIONS:
            raise _fail(f"'OPTIONS' has unknown key {key!r} (known: {', '.join(QUEUE_OPTIONS)})")
    if options.get("durability", "full") not in ("full", "normal"):
        raise _fail(f"OPTIONS['durability'] must be 'full' or 'normal', "
                    f"not {options['durability']!r}")
    return dict(options)


def _shared(alias: Any, options: dict[str, Any]) -> Config:
    if not isinstance(alias, str) or alias not in settings.DATABASES:
        raise _fail(f"'DATABASE' must name one of settings.DATABASES "
                    f"({', '.join(map(repr, settings.DATABASES))}), not {alias!r}")
    found = _alias_location(alias, strict=True)
    assert found is not None
    location, password = found
    return Config(location, alias, sqlite3=not is_url(location), options=options,
                  password=password)


def _alias_location(alias: str, *, strict: bool) -> tuple[str, str | None] | None:
    """(location, password) of a Django database sqlq can share; None (or, strict, an
    error saying why) for one it cannot."""
    db = connections.settings[alias]  # a test run's test database too; no backend loaded
    kind = _ENGINES.get(db.get("ENGINE", ""))
    name = os.fspath(db.get("NAME") or "")
    if kind is None:
        if strict:
            raise _fail(f"DATABASES[{alias!r}] uses {db.get('ENGINE')}; sqlq shares SQLite "
                        "and PostgreSQL databases only (give the queue its own 'DB')")
        return None
    if kind == "sqlite":
        if not name or name == ":memory:" or "mode=memory" in name:
            if strict:
                raise _fail(f"DATABASES[{alias!r}] is an in-memory SQLite database, which "
                            "other processes cannot open: give it a file, or sqlq a 'DB'")
            return None
        return name, None
    password = db.get("PASSWORD") or None
    user = quote(db.get("USER") or "", safe="")
    auth = f"{user}:{quote(password, safe='')}@" if password else f"{user}@" if user else ""
    host = db.get("HOST") or ""
    port = f":{db['PORT']}" if db.get("PORT") else ""
    netloc = f"[{host}]" if ":" in host else quote(host, safe="") if host.startswith("/") \
        else host
    return f"postgresql://{auth}{netloc}{port}/{quote(name, safe='')}", password
