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
    "hostname", "os", "platform", "sqlq-version", "sqlq-process", "current-jobs-waiting",
)
STATS_TUBE_KEYS = (
    "name", "current-jobs-urgent", "current-jobs-ready", "current-jobs-reserved",
    "current-jobs-delayed", "current-jobs-buried", "total-jobs", "current-using",
    "current-watching", "current-waiting", "cmd-delete", "cmd-pause-tube", "pause",
    "pause-time-left", "current-jobs-waiting",
)
STATS_JOB_KEYS = (
    "id", "tube", "state", "pri", "age", "delay", "ttr", "time-left", "file", "reserves",
    "timeouts", "releases", "buries", "kicks",
)
QUOTED_KEYS = frozenset({"version"})
"""Keys whose string values beanstalkd 1.12 writes in double quotes (``"1.12"``, which
a YAML reader would otherwise take for a number)."""

#: sqlq's own keys, after beanstalkd's (clients that know only beanstalkd's ignore them):
#: ``sqlq-version`` and ``sqlq-process`` (``I/N``: the I-th of the N processes serving
#: the port, ``--processes``; ``1/1`` for one) in ``stats``; ``current-jobs-waiting`` in
#: ``stats`` and ``stats-tube``, the jobs put with ``after=`` (by the library: the
#: protocol has no such put) whose parents are not all gone. They are in no other
#: reply: ``peek``, ``stats-job``, ``kick-job``, ``reserve-job`` and ``delete`` of one
#: answer NOT_FOUND.
EXTENSION_KEYS = frozenset({"sqlq-version", "sqlq-process", "current-jobs-waiting"})

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
