"""Stats with beanstalkd's key names, as of now, for the library, the CLI and ``top``.

Counts come from the file (one pass over the jobs table: stats are for people and
monitors, not the hot path). Counters of commands (``total-jobs`` of a tube,
``cmd-delete``, ``cmd-pause-tube``) are the Queue object's own, since it was
opened, as beanstalkd's are since its start; ``stats()["total-jobs"]`` is the
file's, since it was created. The beanstalkd server keeps its own counters.
"""

from __future__ import annotations

import os
from collections import Counter
from typing import Any

from . import __version__
from .backends import Backend
from .backends.base import Conn
from .errors import JobNotFound
from .model import DEFAULT_TUBE, STATE_NAMES, check_tube


def file_stats(backend: Backend, now: int, max_job_size: int) -> dict[str, Any]:
    """The whole database's counts (``Queue.stats``)."""
    store = backend.store

    def read(c: Conn) -> Any:
        return (store.count_jobs(c, now, None), store.total_jobs(c), store.list_tubes(c, now),
                store.count_topics(c))

    counts, total, tubes, n_topics = backend.read(read)
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
        "max-job-size": max_job_size,
        "pid": os.getpid(),
        "version": __version__,
        "hostname": os.uname().nodename,
        "durability": backend.durability,
        "db": backend.location,
    }


def tube_stats(backend: Backend, now: int, tube: str,
               counts_here: Counter[tuple[str, str]]) -> dict[str, Any]:
    """One tube's counters; a valid name with no jobs has all-zero counters.

    Not JobNotFound for an empty tube: a monitor reading a tube's counters must not
    fail because a worker just drained it, and a missing tube is not a missing job.
    (The beanstalkd server keeps the protocol's NOT_FOUND for tubes it does not know.)
    ``counts_here`` are the Queue's own command counters, since it was opened.
    """
    check_tube(tube)
    store = backend.store

    def read(c: Conn) -> Any:
        return store.count_jobs(c, now, tube).get(tube), store.tube_pause(c, tube)

    counts, pause = backend.read(read)
    paused_until, pause_ms = pause if pause else (0, 0)
    paused = paused_until > now
    ready, urgent, reserved, delayed, buried = counts or [0, 0, 0, 0, 0]
    return {
        "name": tube,
        "current-jobs-urgent": urgent,
        "current-jobs-ready": ready,
        "current-jobs-reserved": reserved,
        "current-jobs-delayed": delayed,
        "current-jobs-buried": buried,
        "total-jobs": counts_here["total-jobs", tube],
        "current-using": 0,
        "current-watching": 0,
        "current-waiting": 0,
        "cmd-delete": counts_here["cmd-delete", tube],
        "cmd-pause-tube": counts_here["cmd-pause-tube", tube],
        "pause": pause_ms // 1000 if paused else 0,
        "pause-time-left": max(0, (paused_until - now) // 1000) if paused else 0,
    }


def job_stats(backend: Backend, now: int, job_id: int) -> dict[str, Any]:
    """One job's record (``Queue.stats_job``): beanstalkd's keys, then sqlq's own about
    its failed runs (``failures``, ``last-error``, ``last-traceback``: sqlq/attempts.py)."""
    store = backend.store

    def read(c: Conn) -> Any:
        return store.select_job(c, now, job_id), store.last_attempt(c, job_id)

    row, last = backend.read(read)
    if row is None:
        raise JobNotFound(f"job {job_id} not found")
    failures, _, last_error, last_traceback = last or (0, "", "", "")
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
        "failures": failures, "last-error": last_error, "last-traceback": last_traceback,
    }
