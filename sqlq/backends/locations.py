"""Where a database is: a ``postgresql://`` URL names a server, anything else a SQLite
file. What the rest of sqlq (and each backend) needs to know about a location without
opening it: which kind it is, whether it exists, one spelling of it, how to print it.
Below the backends, which use it (which files beside a SQLite file are its own is the
SQLite backend's to say: ``registry.companions``).
"""

from __future__ import annotations

import os

from ..errors import DatabaseError

URL_SCHEMES = ("postgresql://", "postgres://")


def is_url(location: str) -> bool:
    """True for a database server URL; anything else is a SQLite file path."""
    return location.startswith(URL_SCHEMES)


def check_scheme(location: str) -> None:
    """Refuse a URL of a server sqlq does not speak, rather than take it for a file path
    (which would read "no database at mysql://...").

    Raises:
        DatabaseError: ``location`` is a URL other than ``postgresql://``.
    """
    scheme, sep, _ = location.partition("://")
    # What looks like a URL of some server (``mysql://``, ``redis://``...): RFC 3986's
    # scheme, tested without ``re`` (a put imports no more than it needs).
    if (sep and scheme[:1].isascii() and scheme[:1].isalpha() and not is_url(location)
            and all(c.isascii() and (c.isalnum() or c in "+.-") for c in scheme)):
        raise DatabaseError(f"unsupported database URL scheme {scheme}://: sqlq "
                            "uses a SQLite file path or a postgresql:// URL")


def exists(location: str) -> bool:
    """False only for a file path with no file (a typo in ``--db``); a server URL is
    checked when it is connected to.

    Raises:
        DatabaseError: a URL of a server sqlq does not speak (:func:`check_scheme`).
    """
    check_scheme(location)
    return is_url(location) or os.path.exists(location)


def redact(location: str) -> str:
    """The location without a URL's password, for messages and logs."""
    if not is_url(location):
        return location
    return _without_passwords(location)


def _without_passwords(url: str) -> str:
    """url without its password: the one before its host, a ``password=`` parameter
    (libpq takes either), and those of URLs in its query (``listen_url=``)."""
    from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

    parts = urlsplit(url)
    lowered = parts.query.lower()
    if "%3a%2f%2f" in lowered or "://" in lowered or "password" in lowered:
        query = [(name, "***" if name.lower() == "password"
                  else _without_passwords(value) if "://" in value else value)
                 for name, value in parse_qsl(parts.query, keep_blank_values=True)]
        parts = parts._replace(query=urlencode(query, safe="*"))
    if parts.password is not None:
        netloc = parts.netloc.rsplit("@", 1)[1]
        user = parts.username or ""
        parts = parts._replace(netloc=f"{user}:***@{netloc}" if user else netloc)
    return urlunsplit(parts)


def identity(location: str) -> str:
    """One name per database, whatever spelling reached it (for comparing locations)."""
    if is_url(location):
        return location
    return os.path.realpath(location)
