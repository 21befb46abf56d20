"""sqlq's own parameters in a postgresql:// URL (issue 37): taken out before psycopg sees
the URL, and a bad value refused in one line that names the parameter, without the
password, before any connection is made."""

from __future__ import annotations

from urllib.parse import quote

import pytest

import sqlq
from sqlq.backends.postgres.pooling import Options, parse

DIRECT = "postgresql://app:secret@db.internal:5432/app"


def test_parameters_are_taken_out_and_the_others_kept() -> None:
    assert parse("postgresql://h/app") == Options("postgresql://h/app", "auto", None)
    url = ("postgresql://app:pw@pool:6432/app?sslmode=require&pooler=transaction"
           f"&listen_url={quote(DIRECT, safe='')}&application_name=x")
    assert parse(url) == Options("postgresql://app:pw@pool:6432/app?sslmode=require"
                                 "&application_name=x", "transaction", DIRECT)
    assert parse("postgresql://h/app?pooler=none").url == "postgresql://h/app"
    # sqlq's parameters inside listen_url mean nothing there: taken out too
    inner = quote(DIRECT + "?pooler=session", safe="")
    assert parse(f"postgresql://h/app?listen_url={inner}").listen_url == DIRECT


@pytest.mark.parametrize(("query", "said"), [
    ("pooler=transactional", "pooler='transactional' is not one of auto, transaction"),
    ("pooler=", "pooler='' is not one of"),
    ("listen_url=db.internal", "listen_url must be a postgresql:// URL"),
    ("listen_url=" + quote("mysql://u:pw@h/db", safe=""), "listen_url must be a postgresql"),
])
def test_a_bad_value_is_refused_in_one_line(query: str, said: str) -> None:
    with pytest.raises(sqlq.DatabaseError) as info:
        sqlq.Queue(f"postgresql://app:secret@127.0.0.1:1/app?{query}")
    message = str(info.value)
    assert said in message and "\n" not in message
    assert "secret" not in message and "pw" not in message
    assert not isinstance(info.value, sqlq.Disconnected)


def test_the_password_of_a_listen_url_is_never_shown() -> None:
    from sqlq.backends.locations import redact

    url = f"postgresql://app:secret@pool/app?listen_url={quote(DIRECT, safe='')}"
    assert "secret" not in redact(url) and "db.internal" in redact(url)


def test_a_password_parameter_is_redacted_too() -> None:
    """libpq takes a password as a query parameter as well as before the host."""
    from sqlq.backends.locations import redact

    url = "postgresql://app@db.internal/q?password=hunter2&sslmode=require"
    shown = redact(url)
    assert "hunter2" not in shown
    assert shown == "postgresql://app@db.internal/q?password=***&sslmode=require"
    nested = "postgresql://pool/q?listen_url=postgresql%3A%2F%2Fdb%2Fq%3Fpassword%3Dhunter2"
    assert "hunter2" not in redact(nested)
