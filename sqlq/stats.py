"""Stats with beanstalkd's key names, as of now, for the library, the CLI and ``top``.

Counts come from the file (one pass over the jobs table: stats are for people and
monitors, not the hot path). Counters of commands (``total-jobs`` of a tube,
``cmd-delete``, ``cmd-pause-tube``) are the Queue object's own, since it was
opened, as beanstalkd's are since its start; ``stats()["total-jobs"]`` is the
file's, since it was created. The beanstalkd server keeps its own counters.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from . import __version__, store
from .errors import JobNotFound
from .model import DEFAULT_TUBE, STATE_NAMES, check_job_id, check_tube

if TYPE_CHECKING:
    import apsw

    from .queue import Queue


def file_stats(queue: Queue) -> dict[str, Any]:
    def read(c: apsw.Connection) -> Any:
        now = queue._clock()
        return (store.count_jobs(c, now, None), store.total_jobs(c), store.list_tubes(c, now),
                store.count_topics(c))

    counts, total, tubes, n_topics = queue._db.read(read)
    ready, urgent, reserved, delayed, buried = (sum(v[i] for v in counts.values())
                                                for i in range(5))
    return {
        "current-jobs-urgent": urgent,
        "current-jobs-ready": ready,
        "current-jobs-reserved": reserved,
        "current-jobs-delayed": delayed,
        "current-jobs-buried": buried,
        "total-jobs": total,
        "current-tubes": len(set(tubes) | {DEFAULT_TUBE}),
        "current-topics": n_topics,
        "max-job-size": queue.max_job_size,
        "pid": os.getpid(),
        "version": __version__,
        "hostname": os.uname().nodename,
        "durability": queue.durability,
        "db": os.path.abspath(queue.path),
    }


def tube_stats(queue: Queue, tube: str) -> dict[str, Any]:
    check_tube(tube)

    def read(c: apsw.Connection) -> Any:
        now = queue._clock()
        return (now, store.count_jobs(c, now, tube).get(tube), store.tube_pause(c, tube),
                store.tube_subscribed(c, tube))

    now, counts, pause, subscribed = queue._db.read(read)
    paused_until, pause_ms = pause if pause else (0, 0)
    paused = paused_until > now
    if counts is None and not paused and not subscribed and tube != DEFAULT_TUBE:
        raise JobNotFound(f"tube {tube!r} not found")
    ready, urgent, reserved, delayed, buried = counts or [0, 0, 0, 0, 0]
    return {
        "name": tube,
        "current-jobs-urgent": urgent,
        "current-jobs-ready": ready,
        "current-jobs-reserved": reserved,
        "current-jobs-delayed": delayed,
        "current-jobs-buried": buried,
        "total-jobs": queue._counts["total-jobs", tube],
        "current-using": 0,
        "current-watching": 0,
        "current-waiting": 0,
        "cmd-delete": queue._counts["cmd-delete", tube],
        "cmd-pause-tube": queue._counts["cmd-pause-tube", tube],
        "pause": pause_ms // 1000 if paused else 0,
        "pause-time-left": max(0, (paused_until - now) // 1000) if paused else 0,
    }


def job_stats(queue: Queue, job_id: int) -> dict[str, Any]:
    check_job_id(job_id)

    def read(c: apsw.Connection) -> Any:
        now = queue._clock()
        return now, store.select_job(c, now, job_id)

    now, row = queue._db.read(read)
    if row is None:
        raise JobNotFound(f"job {job_id} not found")
    state = STATE_NAMES[row.state]
    if state == "delayed" and row.delay_until is not None:
        time_left = row.delay_until - now
    elif state == "reserved" and row.reserved_until is not None:
        time_left = row.reserved_until - now
    else:
        time_left = 0
    return {
        "id": row.id, "tube": row.tube, "state": state, "pri": row.priority,
        "age": max(0, (now - row.created_at) // 1000),
        "delay": row.delay // 1000,
        "ttr": row.ttr // 1000, "time-left": max(0, time_left // 1000), "file": 0,
        "reserves": row.reserves, "timeouts": row.timeouts, "releases": row.releases,
        "buries": row.buries, "kicks": row.kicks,
    }
