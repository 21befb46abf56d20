"""What holds the cleanup horizon back: the report, its thresholds, and the warnings.

A job queue's storage stays bounded only while old versions of its rows can be
cleaned up, and someone else's long transaction stops that on both backends:

* **PostgreSQL**: a row deleted after the oldest snapshot still in use (an open
  transaction, a prepared one, a replication slot, a standby's
  ``hot_standby_feedback``) cannot be vacuumed, and every claim walks it. The
  report names the holder of this database's xmin horizon (the one whose xmin is
  oldest, by transaction ids), how long it has held it, and the dead rows of
  sqlq's tables.
* **SQLite**: a reader's snapshot keeps a checkpoint from copying the WAL's newer
  frames back into the file, and the WAL cannot start again from its beginning: it
  grows with every commit. The report gives the -wal file's size, the bytes a
  checkpoint could not copy back, and how long the WAL has been starved.

Each backend fills a :class:`Horizon` (``Backend.horizon``, read through
``Queue.horizon()``); the dashboard, ``/metrics`` and ``sqlq work`` show it, and
:func:`alarms` says which :class:`Thresholds` it passes. Some ages cannot be read
from the database (a replication slot's, a standby's, a session of another role's
when this one may not see its transaction): those count from when this process
first saw the holder (:class:`FirstSeen`), so a fresh process reads them as young.
"""

from __future__ import annotations

import os
import re
import threading
from collections.abc import Callable, Collection, Hashable, Mapping
from dataclasses import dataclass, field

from .core.durations import format_duration, parse_duration
from .errors import Error

#: The operations page on long transactions (docs/long-transactions.md).
DOCS_PAGE = "long-transactions.md"
#: Warn when the horizon has been held this long (seconds; ``SQLQ_WARN_HORIZON_AGE``).
DEFAULT_AGE = 300.0
#: Warn when the SQLite -wal file is this large (bytes; ``SQLQ_WARN_WAL_SIZE``).
DEFAULT_WAL_BYTES = 256 * 1024 * 1024
#: How often ``sqlq work`` looks at most (seconds; ``SQLQ_HORIZON_CHECK``).
DEFAULT_CHECK_EVERY = 30.0

_UNITS = {"": 1, "b": 1, "k": 1024, "kb": 1024, "kib": 1024, "m": 1024**2, "mb": 1024**2,
          "mib": 1024**2, "g": 1024**3, "gb": 1024**3, "gib": 1024**3}


def parse_size(text: str) -> int:
    """A size in bytes: ``1048576``, ``512k``, ``256MiB``, ``1G`` (powers of 1024).

    Raises:
        ValueError: not a size.
    """
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([a-zA-Z]*)\s*", str(text))
    unit = match.group(2).lower() if match else ""
    if match is None or unit not in _UNITS:
        raise ValueError(f"{text!r} is not a size (bytes, or with k, M, G: 256M)")
    return int(float(match.group(1)) * _UNITS[unit])


def format_size(n: int) -> str:
    """``412.3 MiB``: a size for people."""
    size = float(n)
    for unit in ("B", "KiB", "MiB"):
        if size < 1024:
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{size:.1f} GiB"


@dataclass(frozen=True)
class Thresholds:
    """When the horizon deserves a warning; :meth:`from_env` reads an operator's."""

    age: float = DEFAULT_AGE  # seconds the horizon may be held (SQLite: the WAL starved)
    wal_bytes: int = DEFAULT_WAL_BYTES  # the -wal file's size (SQLite)

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Thresholds:
        """``SQLQ_WARN_HORIZON_AGE`` (a duration: ``5m``) and ``SQLQ_WARN_WAL_SIZE``
        (``256M``), else the defaults.

        Raises:
            sqlq.Error: a value that does not parse, in one line naming the variable.
        """
        env = os.environ if environ is None else environ
        return cls(age=_setting(env, "SQLQ_WARN_HORIZON_AGE", parse_duration, DEFAULT_AGE),
                   wal_bytes=int(_setting(env, "SQLQ_WARN_WAL_SIZE", parse_size,
                                          DEFAULT_WAL_BYTES)))


def check_every(environ: Mapping[str, str] | None = None) -> float:
    """Seconds between two looks of ``sqlq work`` (``SQLQ_HORIZON_CHECK``, default 30 s)."""
    env = os.environ if environ is None else environ
    return _setting(env, "SQLQ_HORIZON_CHECK", parse_duration, DEFAULT_CHECK_EVERY)


def _setting(env: Mapping[str, str], name: str, parse: Callable[[str], float],
             default: float) -> float:
    text = env.get(name, "").strip()
    if not text:
        return default
    try:
        return parse(text)
    except ValueError as e:
        raise Error(f"${name}: {e}") from None


#: What may hold PostgreSQL's xmin horizon (:attr:`Holder.kind`).
HOLDER_KINDS = ("transaction", "prepared", "slot", "standby")


@dataclass(frozen=True)
class Holder:
    """One thing holding PostgreSQL's xmin horizon back."""

    kind: str  # "transaction", "prepared" (2PC), "slot" (replication), "standby" (feedback)
    name: str  # "pid 4242", "gid p1", or the slot's name
    seconds: float  # how long: read from the server, or (``observed``) since first seen
    xid_age: int  # transactions since its xmin: what orders holders exactly
    detail: str = ""  # who and what: user, database, state, the query's start
    visible: bool = True  # False: another role's session, its transaction hidden from us
    observed: bool = False  # True: ``seconds`` counts from when this process first saw it

    def describe(self) -> str:
        """``transaction pid 4242 (app on shop, idle in transaction: SELECT ...)``."""
        what = f"{self.kind} {self.name}"
        return f"{what} ({self.detail})" if self.detail else what


@dataclass(frozen=True)
class Horizon:
    """What holds cleanup back, as of ``at`` (ms); fields not of the backend are None."""

    backend: str  # "sqlite" or "postgres"
    at: int
    age: float = 0.0  # seconds the horizon has been held (0: nothing holds it)
    holder: Holder | None = None  # PostgreSQL: the holder of the oldest xmin
    holders: list[Holder] = field(default_factory=list)  # PostgreSQL: all, oldest first
    hidden: int = 0  # PostgreSQL: sessions whose transaction this role may not see
    dead_rows: dict[str, int] = field(default_factory=dict)  # PostgreSQL: per sqlq table
    wal_bytes: int | None = None  # SQLite: the -wal file's size
    wal_starved_bytes: int | None = None  # SQLite: WAL a checkpoint could not copy back


def alarms(horizon: Horizon, thresholds: Thresholds) -> dict[str, str]:
    """The thresholds ``horizon`` passes, each (``"horizon"``, ``"wal"``) with a sentence
    for people; empty when all is well."""
    found = {}
    age = format_duration(horizon.age)
    limit = format_duration(thresholds.age)
    if horizon.backend == "postgres" and horizon.holder and horizon.age > thresholds.age:
        holder = horizon.holder
        since = " (as seen by this process)" if holder.observed else ""
        dead = sum(horizon.dead_rows.values())
        found["horizon"] = (f"the oldest snapshot holding back cleanup of deleted jobs is "
                            f"{holder.describe()}, held for {age}{since}, over {limit}; "
                            f"{dead} dead rows in sqlq's tables wait for it, and claims "
                            "walk them")
    if horizon.backend == "sqlite":
        if horizon.age > thresholds.age:
            starved = format_size(horizon.wal_starved_bytes or 0)
            found["horizon"] = (f"a reader's snapshot has kept checkpoints from the WAL for "
                                f"{age}, over {limit} ({starved} not copied back): the -wal "
                                "file grows with every commit until the reader ends")
        if horizon.wal_bytes is not None and horizon.wal_bytes > thresholds.wal_bytes:
            found["wal"] = (f"the -wal file is {format_size(horizon.wal_bytes)}, over "
                            f"{format_size(thresholds.wal_bytes)}")
    return found


class FirstSeen:
    """When this process first saw each holder whose age the database does not say.

    ``age(key, now)`` is the seconds since the first call with ``key``; ``keep`` forgets
    keys not seen in the latest look, so a holder that comes back starts again at 0.
    """

    def __init__(self) -> None:
        self._seen: dict[Hashable, int] = {}
        self._lock = threading.Lock()  # a dashboard's threads share the backend

    def age(self, key: Hashable, now: int) -> float:
        with self._lock:
            return max(now - self._seen.setdefault(key, now), 0) / 1000

    def keep(self, keys: Collection[Hashable]) -> None:
        with self._lock:
            for key in set(self._seen) - set(keys):
                del self._seen[key]
