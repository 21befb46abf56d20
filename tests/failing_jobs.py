"""Importable tasks that fail, for the attempt-history tests (``sqlq work --import
tests.failing_jobs``): each raises inside a helper, so a kept traceback must name this
file and the helper's line, not only the exception's last line."""

from __future__ import annotations

import os

import sqlq

from .workers import private_db

q = sqlq.Queue(os.environ.get("SQLQ_DB") or private_db())

#: The line of the ``raise`` in :func:`_lookup`, which a kept traceback names.
LOOKUP_LINE = 0


def _lookup(order: dict[str, int], key: str) -> int:
    return order[key]  # the failing line: LOOKUP_LINE


LOOKUP_LINE = _lookup.__code__.co_firstlineno + 1


@q.task(tube="attempts", retries=1, backoff=0)
def price(order: dict[str, int]) -> int:
    """Fails with KeyError in _lookup: retried once, then buried."""
    return _lookup(order, "sku") * 2


@q.task(tube="attempts", retries=12, backoff=0)
def always(note: str) -> None:
    """Fails every time, at once: 13 runs, more than the attempts kept."""
    raise RuntimeError(f"always fails: {note}")


@q.task(tube="attempts", retries=0)
def loud() -> None:
    """Fails with a message far longer than a kept traceback."""
    raise ValueError("x" * 20_000 + " END")


@q.task(tube="attempts", retries=1, backoff=0)
def once(marker: str) -> str:
    """Fails on its first run (no marker file yet), succeeds on the next."""
    if not os.path.exists(marker):
        open(marker, "w").close()
        return str(_lookup({}, "first run"))
    return "ok"


#: The users _greet knows: any other raises KeyError on one line, its message the user.
USERS = {"alice": "Alice"}


def _greet(user: str) -> str:
    return f"Welcome, {USERS[user]}"  # the failing line: GREET_LINE


GREET_LINE = _greet.__code__.co_firstlineno + 1


@q.task(tube="welcome", retries=0)
def welcome(user: str) -> str:
    """Web check F-2: KeyError 'bob', 'carol', 'dave' from one line are one failure."""
    return _greet(user)
