"""sqlq's own URL parameters, and what kind of pooler (if any) stands between sqlq and
PostgreSQL (issue 37).

A provider hands out one URL, often a pooled one, so sqlq's options travel in it and
are taken out before psycopg (libpq) sees it:

* ``pooler=auto|transaction|session|none``: what is between sqlq and the server;
  ``auto`` (the default) finds out at the first connection (:func:`detect`), the others
  say it where detection cannot run or cannot be trusted (a pooler that passes the
  server's pid through);
* ``listen_url=<postgresql://…>``: a direct URL for the one connection per process that
  LISTENs; through a transaction pool, without it waiters poll every :data:`POLL_S`.

Through a transaction pool (PgBouncer's ``pool_mode = transaction``) each transaction
may run on another server session, shared with other clients, so nothing of a session
is relied upon: no prepared statements, no session settings, no session locks
(owners.py: liveness by heartbeats alone), no LISTEN unless on ``listen_url``.
"""

from __future__ import annotations

import logging
from typing import Any, Literal, NamedTuple, cast
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import psycopg

from ...errors import DatabaseError
from ..locations import is_url, redact

log = logging.getLogger("sqlq")

Mode = Literal["direct", "session", "transaction"]
#: The values of ``pooler=``: ``none`` is a direct connection (no pooler).
POOLERS = ("auto", "transaction", "session", "none")
#: Through a transaction pool without ``listen_url``, waiters look this often.
POLL_S = 0.5
#: How many times :func:`detect` asks for the sessions of two clients (each round is
#: two statements): a transaction pool busy with others may hide in one round.
PROBE_ROUNDS = 5

#: The mode found for each URL, so that reconnects and other Queues do not look again.
_modes: dict[str, Mode] = {}


class Options(NamedTuple):
    """A sqlq URL, parsed: what psycopg gets, and sqlq's own parameters."""

    url: str
    pooler: str
    listen_url: str | None


def parse(url: str) -> Options:
    """Take ``pooler`` and ``listen_url`` out of url's query.

    Raises:
        DatabaseError: a bad value, in one line naming the parameter (the URL redacted).
    """
    parts = urlsplit(url)
    if "pooler=" not in parts.query and "listen_url=" not in parts.query:
        return Options(url, "auto", None)
    kept: list[tuple[str, str]] = []
    pooler, listen = "auto", None
    for name, value in parse_qsl(parts.query, keep_blank_values=True):
        if name == "pooler":
            if value not in POOLERS:
                raise DatabaseError(f"{redact(url)}: pooler={value!r} is not one of "
                                    f"{', '.join(POOLERS)}")
            pooler = value
        elif name == "listen_url":
            if not is_url(value):
                scheme = value.partition("://")[0] if "://" in value else value[:20]
                raise DatabaseError(f"{redact(url)}: listen_url must be a postgresql:// URL, "
                                    f"percent-encoded inside this one (not {scheme!r}...)")
            listen = parse(value).url  # sqlq's parameters mean nothing there
        else:
            kept.append((name, value))
    return Options(urlunsplit(parts._replace(query=urlencode(kept))), pooler, listen)


def forced(pooler: str) -> Mode | None:
    """The mode ``pooler=`` says, None for ``auto``."""
    return {"none": "direct", "session": "session", "transaction": "transaction"}.get(
        pooler)  # type: ignore[return-value]


def detect(conn: psycopg.Connection[Any], url: str, options: dict[str, Any]) -> Mode:
    """What conn (new, idle, autocommit) reaches: PostgreSQL directly, a session pool, or
    a transaction pool. Once a URL a process.

    Directly the server's pid of the session is the one the connection was told at
    login: nothing more is asked. A pooler hands out keys of its own; then a second
    client asks for its session, a few times: a session pool never gives it conn's and
    conn keeps its own, while a transaction pool hands the session conn just released
    to the next asker (PgBouncer reuses the last released first), or gives conn another
    one. Any sign of sharing means a transaction pool: taking a session pool for one
    costs only speed, the other way round would hand jobs out twice. (LISTEN in one
    transaction and ``pg_listening_channels()`` in the next does not tell: an idle
    PgBouncer 1.18 gives the next transaction the same server session.)"""
    known = _modes.get(url)
    if known is not None:
        return known
    pid = _pid(conn)
    mode: Mode = "direct"
    if pid != conn.info.backend_pid:
        mode = "session"
        with psycopg.Connection.connect(url, autocommit=True, prepare_threshold=None,
                                        **options) as other:
            for _ in range(PROBE_ROUNDS):
                if _pid(other) == pid or _pid(conn) != pid:
                    mode = "transaction"
                    break
        if mode == "transaction":
            _refuse_statement_pool(conn, url)
    _modes[url] = mode
    return mode


def _refuse_statement_pool(conn: psycopg.Connection[Any], url: str) -> None:
    """A statement pool (PgBouncer's ``pool_mode = statement``) passes the probe as a
    transaction pool does, and refuses every transaction, sqlq's claims among them,
    closing the connection: say so at once, not as a server away."""
    try:
        with conn.transaction():
            _pid(conn)
    except psycopg.Error as e:
        if "statement pooling" not in str(e):
            raise
        raise DatabaseError(f"{redact(url)}: a pooler in statement mode refuses "
                            "transactions, which sqlq needs: use a transaction or session "
                            "pool, or the server directly") from None


def _pid(conn: psycopg.Connection[Any]) -> int:
    row = conn.execute("SELECT pg_backend_pid()").fetchone()
    return int(cast(int, row[0])) if row else 0


def describe(location: str, mode: Mode, listen_url: str | None, grace_s: float) -> None:
    """The one line at open that says what sqlq found between it and the server, and
    what it does about it (nothing is said of a direct connection). INFO: ``sqlq work``
    shows it; a ``sqlq put`` through a pool does not repeat it on every call."""
    if mode == "session":
        log.info("%s: through a session pool: sqlq works as directly", location)
    elif mode == "transaction" and listen_url:
        log.info("%s: through a transaction pool (server sessions shared between "
                 "clients): no prepared statements, liveness by heartbeats (a dead holder's "
                 "jobs back at once on its own machine, within %.0f s from another), "
                 "wakeups by LISTEN on listen_url %s", location, grace_s, redact(listen_url))
    elif mode == "transaction":
        log.info("%s: through a transaction pool (server sessions shared between "
                    "clients): no prepared statements, liveness by heartbeats (a dead "
                    "holder's jobs back at once on its own machine, within %.0f s from "
                    "another), waiters poll every %.1f s; add ?listen_url=<a direct "
                    "postgresql:// URL> for wakeups at once", location, grace_s, POLL_S)
