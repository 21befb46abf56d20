"""The workers registry: every running ``sqlq work`` process, idle or busy.

Before it, the dashboard knew a worker only by the reservations it held, so an idle
worker was invisible and ``sqlq_workers`` read 0 on a healthy, quiet queue. Now each
worker process writes a row (``sqlq_workers``: host, pid, tubes, when it started, its
last heartbeat, the job it runs, the runs it ended) when it starts, once per heartbeat
(:data:`BEAT_S`) after that, busy or idle, and when a job has run a second that the row
does not name (or the worker idled a second after one), and deletes it when it stops
(:class:`sqlq.work.presence.Presence` does the worker's side).

Liveness is the backend's, not a new heartbeat: a row's ``token`` is the worker's
owner token, the registration that ends by itself when its process dies, SIGKILL
included (SQLite: the kernel unlocks its owner file; PostgreSQL: its session's
advisory lock is freed and its keeper stops renewing ``seen_at``). :func:`live` shows
only rows whose owner is alive (:meth:`~sqlq.backends.base.Backend.live_owners`), so a
killed worker stops counting at once on SQLite, and on PostgreSQL once the server sees
its connection close (from another machine: then within the keeper's 5 s grace);
``Operations.sweep_workers``, run by workers, deletes such rows.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

#: How often a worker writes its row, busy or idle: its heartbeat and the runs it ended
#: are as of then (the job it runs is written within about a second of its start, see
#: sqlq/work/presence.py), never written once per job.
BEAT_S = 5.0


@dataclass(frozen=True)
class Registered:
    """A running worker process's row."""

    token: str
    host: str
    pid: int
    tubes: list[str]
    started_at: int  # ms
    seen_at: int  # ms: its last heartbeat
    job_id: int | None  # the job it ran at its last heartbeat; None: idle
    jobs_done: int  # runs it ended, as of seen_at

    @classmethod
    def from_row(cls, row: tuple[Any, ...]) -> Registered:
        token, host, pid, tubes, started_at, seen_at, job_id, jobs_done = row
        return cls(str(token), str(host), int(pid), sorted(str(tubes).split(",")),
                   int(started_at), int(seen_at), None if job_id is None else int(job_id),
                   int(jobs_done))


def alive(rows: list[Registered], live: Iterable[str]) -> list[Registered]:
    """Those of ``rows`` whose owner token is in ``live`` (the backend's answer: its
    registration holds), in order: what the Workers page shows, and what the sweep keeps.
    A function of the rows alone: the verbs ask the backend, this module stands below it."""
    held = set(live)
    return [r for r in rows if r.token in held]
