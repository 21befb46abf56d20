"""The server's counters and the three stats documents (``stats``, ``stats-tube``, ``stats-job``).

Counters that beanstalkd keeps in memory (``cmd-*``, ``total-jobs``, the
per-tube ``cmd-delete``...) live here and start at zero with the server; job
counts come from the file, so they include what library users and other
servers did.
"""

from __future__ import annotations

import os
import time
from collections import Counter

from sqlq.server.protocol import DEFAULT_TUBE, PROTOCOL_VERSION
from sqlq.server.yaml import STATS_JOB_KEYS, STATS_KEYS, STATS_TUBE_KEYS, Scalar, yaml_dict

TYPE_CHECKING = False
if TYPE_CHECKING:
    from sqlq.server.core import Server


class Stats:
    """beanstalkd's in-memory counters, and the documents that report them."""

    def __init__(self) -> None:
        self.cmds: Counter[str] = Counter()  # cmd-<verb>
        self.tube_counts: Counter[tuple[str, str]] = Counter()  # (key, tube)
        self.total_jobs = 0
        self.total_connections = 0
        self.job_timeouts = 0
        self.started = time.monotonic()
        self.instance_id = os.urandom(8).hex()

    def server_doc(self, server: Server) -> bytes:
        """The ``stats`` document."""
        file_stats = server.q.stats()
        usage = _rusage()
        uname = os.uname()
        conns = server.conns
        values: dict[str, Scalar] = {
            k: file_stats[k] for k in STATS_KEYS if k.startswith("current-jobs-")}
        values.update({k: self.cmds[k[4:]] for k in STATS_KEYS if k.startswith("cmd-")})
        values.update({
            "job-timeouts": self.job_timeouts, "total-jobs": self.total_jobs,
            "max-job-size": server.max_job_size, "current-tubes": len(tubes(server)),
            "current-connections": len(conns),
            "current-producers": sum(c.producer for c in conns),
            "current-workers": sum(c.worker for c in conns),
            "current-waiting": len(server.waiters), "total-connections": self.total_connections,
            "pid": os.getpid(), "version": version(), "rusage-utime": usage[0],
            "rusage-stime": usage[1], "uptime": int(time.monotonic() - self.started),
            "binlog-oldest-index": 0, "binlog-current-index": 0, "binlog-records-migrated": 0,
            "binlog-records-written": 0, "binlog-max-size": 10485760,
            "draining": server.draining, "id": self.instance_id, "hostname": uname.nodename,
            "os": uname.version, "platform": uname.machine, "sqlq-version": sqlq_version(),
        })
        return yaml_dict(STATS_KEYS, values)

    def tube_doc(self, server: Server, tube: str) -> bytes | None:
        """The ``stats-tube`` document; None for a tube beanstalkd would not know."""
        if tube not in tubes(server):
            return None
        values = server.q.stats_tube(tube)  # all zeros for a tube only a client names
        conns = server.conns
        values.update({
            "name": tube, "total-jobs": self.tube_counts["total-jobs", tube],
            "current-using": sum(c.use == tube for c in conns),
            "current-watching": sum(tube in c.watch for c in conns),
            "current-waiting": sum(tube in w.tubes for w in server.waiters.waiting.values()),
            "cmd-delete": self.tube_counts["cmd-delete", tube],
            "cmd-pause-tube": self.tube_counts["cmd-pause-tube", tube],
        })
        return yaml_dict(STATS_TUBE_KEYS, values)

    def job_doc(self, server: Server, job_id: int) -> bytes:
        """The ``stats-job`` document.

        Raises:
            JobNotFound: no such job.
        """
        values = server.q.stats_job(job_id)
        values["file"] = 0
        return yaml_dict(STATS_JOB_KEYS, values)


def tubes(server: Server) -> list[str]:
    """Tubes as beanstalkd sees them: ``default``, those with jobs, those a client names."""
    names = dict.fromkeys([DEFAULT_TUBE, *server.q.tubes()])
    for conn in server.conns:
        names.update(dict.fromkeys([conn.use, *conn.watch]))
    return list(names)


def version() -> str:
    """The version ``stats`` reports: the protocol release, exactly as beanstalkd 1.12
    writes its own, since clients parse it (node clients as semver: a suffix such as
    ``1.12+sqlq.0.1.0`` made them fail). sqlq's own is :func:`sqlq_version`."""
    return PROTOCOL_VERSION


def sqlq_version() -> str:
    """sqlq's version, reported in a key of its own (``sqlq-version``), after
    beanstalkd's keys, where clients that know only beanstalkd's keys ignore it."""
    from sqlq import __version__

    return __version__


def _rusage() -> tuple[float, float]:
    import resource

    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime, usage.ru_stime
