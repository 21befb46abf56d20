"""Stats with beanstalkd's key names, as of now, for the library, the CLI and ``top``.

Counts come from the file (one pass over the jobs table: stats are for people and
monitors, not the hot path). A tube's ``total-jobs``, ``cmd-delete`` and
``cmd-pause-tube`` are the database's too, since it was created, whoever put,
deleted or paused (SQLite migration 0009, PostgreSQL 0010), as is
``stats()["total-jobs"]``. The reads are verbs (``sqlq/verbs/views.py``: ``stats``,
``stats_tube``, ``stats_job``); what is here makes their documents, without the database.
"""

from __future__ import annotations

import os
from typing import Any

from .control import decode_progress
from .errors import JobNotFound
from .model import DEFAULT_TUBE, STATE_NAMES
from .version import __version__


def file_doc(read: tuple[Any, ...], max_job_size: int, durability: str,
             location: str) -> dict[str, Any]:
    """The ``stats`` document (``Queue.stats``) from ``Store.file_counts``' answer."""
    counts, total, tubes, n_topics = read
    ready, urgent, reserved, delayed, buried, waiting = (sum(v[i] for v in counts.values())
                                                         for i in range(6))
    return {
        "current-jobs-urgent": urgent,
        "current-jobs-ready": ready,
        "current-jobs-reserved": reserved,
        "current-jobs-delayed": delayed,
        "current-jobs-buried": buried,
        "current-jobs-waiting": waiting,
        "total-jobs": total,
        "current-tubes": len(set(tubes) | {DEFAULT_TUBE}),
        "current-topics": n_topics,
        "max-job-size": max_job_size,
        "pid": os.getpid(),
        "version": __version__,
        "hostname": os.uname().nodename,
        "durability": durability,
        "db": location,
    }


def tube_doc(read: tuple[Any, ...], now: int, tube: str) -> dict[str, Any]:
    """The ``stats_tube`` document from ``Store.tube_record``'s answer, as of ``now`` (the
    pause's time left runs on while the counts hold); all zeros for a tube without jobs.

    Not JobNotFound for an empty tube: a monitor reading a tube's counters must not
    fail because a worker just drained it, and a missing tube is not a missing job.
    (The beanstalkd server keeps the protocol's NOT_FOUND for tubes it does not know.)
    """
    counts, pause, (puts, pauses), limits = read
    _, cap, rate, rate_ms, *_ = limits[0] if limits else (tube, None, None, None)
    paused_until, pause_ms = pause if pause else (0, 0)
    paused = paused_until > now
    ready, urgent, reserved, delayed, buried, waiting = counts or [0, 0, 0, 0, 0, 0]
    return {
        "name": tube,
        "current-jobs-urgent": urgent,
        "current-jobs-ready": ready,
        "current-jobs-reserved": reserved,
        "current-jobs-delayed": delayed,
        "current-jobs-buried": buried,
        "current-jobs-waiting": waiting,
        "total-jobs": puts,
        "current-using": 0,
        "current-watching": 0,
        "current-waiting": 0,
        "cmd-delete": max(puts - ready - reserved - delayed - buried - waiting, 0),
        "cmd-pause-tube": pauses,
        "pause": pause_ms // 1000 if paused else 0,
        "pause-time-left": max(0, (paused_until - now) // 1000) if paused else 0,
        # sqlq's flow control (sqlq/core/limits.py); 0: no such limit.
        "limit-concurrency": cap or 0,
        "limit-rate": rate or 0,
        "limit-rate-seconds": rate_ms / 1000 if rate_ms else 0,
    }


def job_doc(read: tuple[Any, ...], now: int, job_id: int) -> dict[str, Any]:
    """One job's record (``Queue.stats_job``) from ``Store.job_record``'s answer:
    beanstalkd's keys, then sqlq's own about its failed runs (``failures``,
    ``last-error``, ``last-traceback``: sqlq/attempts.py), ``waiting-on``, the parents it
    still waits for (0 unless it is waiting), and its ``progress`` and
    ``progress-message`` (sqlq/control.py; ``""`` before any), its ``steps`` and
    ``cursors`` (sqlq/steps.py), and its ``group`` (None: none)."""
    row, last, waiting_on, progress, steps = read
    if row is None:
        raise JobNotFound(f"job {job_id} not found")
    failures, _, last_error, last_traceback = last or (0, "", "", "")
    text, message = progress or (None, None)
    value = decode_progress(text)
    message = message or ""
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
        "waiting-on": waiting_on,
        "progress": "" if value is None else value, "progress-message": message,
        **steps_doc(steps),
        "group": row.grp,
    }


def steps_doc(rows: list[tuple[int, str, str, int]]) -> dict[str, Any]:
    """``stats_job``'s ``steps`` (each finished step: ``name``, ``finished_at`` in ms since
    the epoch, ``value``) and ``cursors`` (``name``, ``value``, ``saved_at``): sqlq/steps.py."""
    from .steps import rows_as_dicts

    steps, cursors = rows_as_dicts(rows)
    return {"steps": steps, "cursors": cursors}
