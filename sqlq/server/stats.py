"""The server's counters and the three stats documents (``stats``, ``stats-tube``, ``stats-job``).

Counters that beanstalkd keeps in memory (``cmd-*``, ``total-jobs``) live here
and start at zero with the server; job counts and a tube's totals (its
``total-jobs``, ``cmd-delete``, ``cmd-pause-tube``) come from the file, so they
include what library users and other servers did.

beanstalkd's stats are O(1) counters; counting the file's jobs is a pass over
them (tens of ms at 80,000 jobs). So what the file said is kept (``FileCounts``)
and reused while it still holds, which the backend's change token tells exactly
(SQLite: data_version and this connection's own writes; PostgreSQL: the snapshot),
up to the next moment a count changes by itself (a delayed job comes due, a TTR
or a pause runs out). A monitor polling ``stats`` of an idle or a slow-moving file
then costs one tiny statement a call; a file that changed is counted again.
"""

from __future__ import annotations

import os
import time
from collections import Counter

from sqlq.errors import JobNotFound
from sqlq.server.loop import now_ms
from sqlq.server.protocol import DEFAULT_TUBE, PROTOCOL_VERSION
from sqlq.server.yaml import STATS_JOB_KEYS, STATS_KEYS, STATS_TUBE_KEYS, Scalar, yaml_dict

TYPE_CHECKING = False  # not `typing` (with re): sqlq-beanstalkd imports this before it listens
if TYPE_CHECKING:
    from collections.abc import Callable, Hashable
    from typing import Any, Protocol

    from sqlq.queue import Queue
    from sqlq.server.batch import Batch
    from sqlq.server.connection import Conn
    from sqlq.server.waiters import Waiters

    class Server(Protocol):
        """What the stats documents read of their server (``core.Server``)."""

        @property
        def q(self) -> Queue: ...

        @property
        def conns(self) -> set[Conn]: ...

        @property
        def file_counts(self) -> FileCounts: ...

        @property
        def batch(self) -> Batch: ...

        @property
        def waiters(self) -> Waiters: ...

        @property
        def max_job_size(self) -> int: ...

        @property
        def draining(self) -> bool: ...


class FileCounts:
    """What the file said, by key, while its change token stays the same and no count
    changes by itself (``until``, ms). Filled only outside the round's write
    transaction: what a read sees inside it may still be rolled back."""

    def __init__(self, server: Server) -> None:
        self.server = server
        self._token: tuple[Any, ...] | None = None
        self._until: int | None = None  # ms; None: nothing timed
        self._values: dict[Hashable, Any] = {}
        self.reads = 0  # how often the file was read for them (tests)

    def get(self, key: Hashable, read: Callable[[], Any]) -> Any:
        """``read()``'s answer for ``key``, reused while the file has not changed."""
        server = self.server
        if server.batch.open:
            self.reads += 1
            return read()
        views = server.q.views
        token = views.change_token()
        now = now_ms()
        if token != self._token or (self._until is not None and now >= self._until):
            self._token, self._values = None, {}
            until = views.next_change()
        elif key in self._values:
            return self._values[key]
        else:
            until = self._until
        self.reads += 1
        value = read()
        if views.change_token() == token:
            if self._token is None:  # nothing committed meanwhile: all read one state
                self._token, self._until = token, until
            self._values[key] = value
        return value


class Stats:
    """beanstalkd's in-memory counters, and the documents that report them."""

    def __init__(self) -> None:
        self.cmds: Counter[str] = Counter()  # cmd-<verb>
        self.total_jobs = 0
        self.total_connections = 0
        self.job_timeouts = 0
        self.started = time.monotonic()
        self.instance_id = os.urandom(8).hex()

    def server_doc(self, server: Server) -> bytes:
        """The ``stats`` document."""
        counts = server.file_counts
        file_stats = counts.get("stats", server.q.views.stats)
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
            "os": uname.version, "platform": uname.machine,
        })
        return yaml_dict(STATS_KEYS, values)

    def tube_doc(self, server: Server, tube: str) -> bytes | None:
        """The ``stats-tube`` document; None for a tube beanstalkd would not know."""
        if tube not in tubes(server):
            return None
        from sqlq import stats as counting

        q = server.q
        read = server.file_counts.get(("tube", tube), lambda: q.views.tube_record(tube))
        values = counting.tube_doc(read, now_ms(), tube)  # zeros for a tube without jobs
        conns = server.conns
        values.update({
            "name": tube,
            "current-using": sum(c.use == tube for c in conns),
            "current-watching": sum(tube in c.watch for c in conns),
            "current-waiting": sum(tube in w.tubes for w in server.waiters.waiting.values()),
        })
        return yaml_dict(STATS_TUBE_KEYS, values)

    def job_doc(self, server: Server, job_id: int) -> bytes:
        """The ``stats-job`` document.

        Raises:
            JobNotFound: no such job, or a job waiting for parents (a state the
                protocol does not have: such a job is in no reply but the counts).
        """
        values = server.q.views.stats_job(job_id)
        if values["state"] == "waiting":
            raise JobNotFound(f"job {job_id} not found")
        values["file"] = 0
        return yaml_dict(STATS_JOB_KEYS, values)


def tubes(server: Server) -> list[str]:
    """Tubes as beanstalkd sees them: ``default``, those with jobs, those a client names."""
    names = dict.fromkeys([DEFAULT_TUBE, *server.file_counts.get("tubes", server.q.views.tubes)])
    for conn in server.conns:
        names.update(dict.fromkeys([conn.use, *conn.watch]))
    return list(names)


def version() -> str:
    """The version ``stats`` reports: the protocol release, exactly as beanstalkd 1.12
    writes its own, since clients parse it (node clients as semver: a suffix such as
    ``1.12+sqlq.0.1.0`` made them fail). sqlq's own is :func:`sqlq_version`."""
    return PROTOCOL_VERSION


def sqlq_version() -> str:
    """sqlq's version, for ``sqlq-beanstalkd -v`` (``stats`` has beanstalkd's keys only)."""
    from sqlq.version import __version__

    return __version__


def _rusage() -> tuple[float, float]:
    import resource

    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime, usage.ru_stime
