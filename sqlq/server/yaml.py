"""beanstalkd's stats documents: the keys in its order, and the YAML it writes.

beanstalkd does not use a YAML library: it prints ``key: value`` lines in a
fixed order, quotes a few string values and writes floats with six decimals.
Clients (greenstalk among them) parse those bytes, so sqlq writes the same.

The release matched is 1.12 (``prot.c`` at tag v1.12, and Debian's binary):
it quotes only ``version``. 1.13 also quotes ``hostname``, ``os``,
``platform``, ``name`` and ``tube``; matching one release byte for byte beats
a mixture that equals neither.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

STATS_KEYS = (
    "current-jobs-urgent", "current-jobs-ready", "current-jobs-reserved",
    "current-jobs-delayed", "current-jobs-buried", "cmd-put", "cmd-peek", "cmd-peek-ready",
    "cmd-peek-delayed", "cmd-peek-buried", "cmd-reserve", "cmd-reserve-with-timeout",
    "cmd-delete", "cmd-release", "cmd-use", "cmd-watch", "cmd-ignore", "cmd-bury", "cmd-kick",
    "cmd-touch", "cmd-stats", "cmd-stats-job", "cmd-stats-tube", "cmd-list-tubes",
    "cmd-list-tube-used", "cmd-list-tubes-watched", "cmd-pause-tube", "job-timeouts",
    "total-jobs", "max-job-size", "current-tubes", "current-connections", "current-producers",
    "current-workers", "current-waiting", "total-connections", "pid", "version",
    "rusage-utime", "rusage-stime", "uptime", "binlog-oldest-index", "binlog-current-index",
    "binlog-records-migrated", "binlog-records-written", "binlog-max-size", "draining", "id",
    "hostname", "os", "platform",
)
STATS_TUBE_KEYS = (
    "name", "current-jobs-urgent", "current-jobs-ready", "current-jobs-reserved",
    "current-jobs-delayed", "current-jobs-buried", "total-jobs", "current-using",
    "current-watching", "current-waiting", "cmd-delete", "cmd-pause-tube", "pause",
    "pause-time-left",
)
STATS_JOB_KEYS = (
    "id", "tube", "state", "pri", "age", "delay", "ttr", "time-left", "file", "reserves",
    "timeouts", "releases", "buries", "kicks",
)
QUOTED_KEYS = frozenset({"version"})
"""Keys whose string values beanstalkd 1.12 writes in double quotes (``"1.12"``, which
a YAML reader would otherwise take for a number)."""

# Exactly beanstalkd 1.12's keys, in its order, and no others: clients compare these
# documents whole (greenstalk's own test suite does), so a key of sqlq's own breaks them.
# sqlq's extras (jobs waiting for parents, limits, the process of ``--processes N``...)
# are in the library's ``stats()``/``stats_tube()``, ``sqlq stats`` and the dashboard.

Scalar = int | float | str | bool


def _scalar(key: str, value: Scalar) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return f"{value:.6f}"
    if isinstance(value, str) and key in QUOTED_KEYS:
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    return str(value)


def yaml_dict(keys: Iterable[str], values: Mapping[str, Scalar]) -> bytes:
    """A stats document: ``---`` then ``key: value`` lines in ``keys`` order."""
    lines = ["---"] + [f"{k}: {_scalar(k, values[k])}" for k in keys]
    return ("\n".join(lines) + "\n").encode("utf-8", "replace")


def yaml_list(names: Iterable[str]) -> bytes:
    """A list-tubes document: ``---`` then ``- name`` lines."""
    return ("---\n" + "".join(f"- {n}\n" for n in names)).encode("ascii")
