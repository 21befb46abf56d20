"""Which failed logins sqlq waits for (the server is away, starting, stopping, full, or
the pooler cannot reach it) and which it says at once (the server answered no): libpq
gives a failed login no SQLSTATE, only its text (backends/postgres/db.py)."""

from __future__ import annotations

import psycopg
import pytest

from sqlq.backends.postgres.db import _unreachable

AT = 'connection failed: connection to server at "127.0.0.1", port 5432 failed: '


@pytest.mark.parametrize("text", [
    "Connection refused\n\tIs the server running on that host and accepting TCP/IP "
    "connections?",
    "timeout expired",
    "server closed the connection unexpectedly",
    "FATAL:  the database system is starting up",
    "FATAL:  the database system is shutting down",
    "FATAL:  the database system is in recovery mode",
    "FATAL:  the database system is not yet accepting connections",
    "FATAL:  sorry, too many clients already",
    "FATAL:  remaining connection slots are reserved for roles with the SUPERUSER attribute",
    "ERROR:  pgbouncer cannot connect to server",
    "ERROR:  server login has been failing, try again later (server_login_retry)",
    # The new session ended as it began: a fast shutdown or pg_terminate_backend reached it
    # mid-login (a chaos run under load: the agent's Queue() raised DatabaseError), or
    # another backend crashed.
    "FATAL:  terminating connection due to administrator command",
    "FATAL:  terminating connection because of crash of another server process",
])
def test_a_server_away_or_busy_is_waited_for(text: str) -> None:
    assert _unreachable(psycopg.OperationalError(AT + text))


@pytest.mark.parametrize("text", [
    'FATAL:  password authentication failed for user "app"',
    'FATAL:  role "nobody" does not exist',
    'FATAL:  database "no_such_db" does not exist',
    "FATAL:  no pg_hba.conf entry for host \"10.0.0.1\", user \"app\", database \"app\"",
    'ERROR:  no such database: nodb',
])
def test_a_refusal_is_said_at_once(text: str) -> None:
    assert not _unreachable(psycopg.OperationalError(AT + text))


@pytest.mark.parametrize(("state", "text", "waited"), [
    ("08P01", "server conn crashed?", True),
    ("08P01", "query_wait_timeout", True),
    ("08P01", "invalid server parameter", True),
    ("08003", "connection does not exist", True),
    ("08006", "server closed the connection unexpectedly", True),
    ("57P01", "terminating connection due to administrator command", True),
    ("08P01", "transaction blocks not allowed in statement pooling mode", False),
])
def test_a_session_gone_under_a_statement_is_waited_for(state: str, text: str, waited: bool
                                                         ) -> None:
    """PgBouncer says 08P01 ("server conn crashed?") when the server session under a
    client's statement ends, and closes the client (issue 37): a lost connection (before,
    a refusal: only 08006 and 57P were); but a statement pool's refusal of transactions,
    with the same code, is said at once."""
    from psycopg import errors

    assert _unreachable(errors.lookup(state)(text)) is waited
