"""Durable steps and cursors: a job that resumes where it stopped (issue 40).

``job.step(name, fn, *args, **kwargs)`` runs ``fn`` once per job: its return value (JSON)
is committed with the job under ``name`` before ``step`` returns it, and a later run of
the same job (after a crash, a SIGKILL, a retry, a release, a snooze, a redeploy) gets
that value back without calling ``fn``. ``job.cursor(name)`` / ``job.save_cursor(name,
value)`` keep a position in a long loop, one small commit per save. ``job.snooze(s)``
gives the job back for a while without counting an attempt. ``job.steps`` lists what
finished. The rows live in ``sqlq_steps`` (migration 0002) and go with the job.

What "once" means, plainly:

* a step whose work is outside sqlq's database (an HTTP call, a file, another
  database) runs **at least once**: a crash after ``fn`` returned and before its record
  committed runs ``fn`` again in the next run. Once the record is committed it never
  runs again for that job;
* ``job.step(name, fn, conn=c)`` runs ``fn`` inside a transaction on ``c``, the
  application's connection to the queue's own database (``with q.transaction() as tx``
  and ``conn=tx``; an ``sqlite3`` or psycopg connection; Django's or SQLAlchemy's), and
  records the step in that same transaction after checking the job's lease in it: the
  write and the record commit together or not at all, so the step runs **exactly once**
  across crashes.

A record is written only under the job's live lease, checked in the writing
transaction. A worker whose lease was lost (its TTR ran out and another took the job,
or the job was cancelled) records nothing: ``step``/``save_cursor`` raise JobLost
(JobCancelled), the run ends, and the job's holder runs the step itself.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable
from typing import Any, Protocol, TypeVar

from .core.durations import seconds_to_ms
from .errors import JobTooBig

T = TypeVar("T")

#: Kinds of row in sqlq_steps: a step (written once), a cursor (saved again and again).
STEP, CURSOR = 0, 1
#: The most steps and cursors one job keeps (a step past it raises JobTooBig, unrun).
MAX_STEPS = 1000
#: The largest value of a step or cursor, as JSON (UTF-8 bytes).
MAX_VALUE = 64 * 1024
#: The longest step or cursor name (characters).
MAX_NAME = 200
#: A step ``_recorded`` did not find.
MISSING: Any = object()


def check_name(name: object) -> str:
    """A step's or cursor's name: a str of 1 to MAX_NAME characters, no line breaks."""
    if not isinstance(name, str):
        raise TypeError(f"name must be a str, not {type(name).__name__}")
    if not 0 < len(name) <= MAX_NAME or "\n" in name or "\r" in name:
        raise ValueError(f"name must be 1-{MAX_NAME} characters on one line, not {name!r}")
    return name


def encode(value: object, name: str) -> str:
    """A value as its record keeps it: JSON of at most MAX_VALUE bytes."""
    import json  # here, not at the top: a put loads this module (model.Job), not json
    try:
        text = json.dumps(value, allow_nan=False, separators=(",", ":"))
    except (TypeError, ValueError) as e:
        raise TypeError(f"step {name!r}: its value cannot be stored as JSON: {e}") from None
    if len(text) > MAX_VALUE and len(text.encode()) > MAX_VALUE:
        raise JobTooBig(f"step {name!r}: its value is {len(text.encode())} bytes of JSON, "
                        f"more than the maximum of {MAX_VALUE}; nothing is recorded")
    return text


def rows_as_dicts(rows: list[tuple[int, str, str, int]]
                  ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """A job's rows (kind, name, value as JSON, ms) as (steps, cursors) for people: each
    step's ``name``, ``value`` and ``finished_at``, each cursor's ``name``, ``value`` and
    ``saved_at`` (ms since the epoch)."""
    import json
    return _as_dicts([(kind, name, json.loads(value), at) for kind, name, value, at in rows])


def recorded_as_dicts(text: str | None
                      ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """A finished record's ``steps`` column (NULL for a job that had none) as rows_as_dicts
    gives a live job's, in its order: steps as they finished, then cursors. Two forms: a
    JSON array of {kind, name, value, at} (PostgreSQL's, and SQLite's records before
    migration 0009), or the four arrays [kinds, names, values, times] SQLite's trigger
    builds without calling a scalar function (migration 0009 says why)."""
    if text is None:
        return [], []
    import json
    found = json.loads(text)
    if found and isinstance(found[0], list):
        rows = list(zip(*found, strict=True))
    else:
        rows = [(r["kind"], r["name"], r["value"], r["at"]) for r in found]
    return _as_dicts(sorted(rows, key=lambda r: (r[0], r[3], r[1])))


def _as_dicts(rows: list[tuple[int, str, Any, int]]
              ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    steps = [{"name": name, "value": value, "finished_at": at}
             for kind, name, value, at in rows if kind == STEP]
    cursors = [{"name": name, "value": value, "saved_at": at}
               for kind, name, value, at in rows if kind == CURSOR]
    return steps, cursors


def snoozed(job: object) -> bool:
    """Whether a Job handle was given back by its own ``snooze`` (the worker then records
    nothing of the run)."""
    return bool(getattr(job, "_snoozed", False))


class StepVerbs(Protocol):
    """The verbs a Job's steps write through (``verbs/contract.py``'s ``Verbs``)."""

    def record_step(self, job_id: int, lease: int, kind: int, name: str, value: str,
                    most: int) -> tuple[str, int]: ...

    def run_step(self, job_id: int, lease: int, name: str, work: Callable[[], str],
                 most: int) -> tuple[str, int, bool]: ...

    def snooze(self, job_id: int, lease: int, delay_ms: int) -> None: ...


class StepViews(Protocol):
    """The read a Job's steps load from (``verbs/views.py``'s ``Views.steps``)."""

    def steps(self, job_id: int) -> list[tuple[int, str, str, int]]: ...


class StepsQueue(Protocol):
    """What a Job asks of its queue for steps (a protocol: this module stands below it)."""

    @property
    def verbs(self) -> StepVerbs: ...

    @property
    def views(self) -> StepViews: ...

    def verbs_in(self, conn: Any) -> StepVerbs:
        """``step(conn=)``'s verbs: those that write in ``conn``'s transaction (a
        ``sqlq.Transaction`` or the application's connection, which only the faces know)."""


class Durable:
    """A :class:`~sqlq.Job`'s steps, cursors and snooze (see the module docstring). A
    handle loads its job's rows once, at its first ``step``, ``cursor`` or ``steps``."""

    # Its own two; a Job has no __dict__ (a worker holds thousands of them).
    __slots__ = ("_done", "_snoozed")

    # The Job's own (model.py), in its __slots__: this class adds methods, no storage.
    id: int
    lease: int | None
    state: str
    _queue: StepsQueue
    _done: dict[tuple[int, str], tuple[str, int]] | None
    _snoozed: bool

    def step(self, name: str, fn: Callable[..., T], /, *args: Any, conn: Any = None,
             **kwargs: Any) -> T:
        """Run ``fn(*args, **kwargs)`` once for this job, durably: its return value (JSON)
        is committed with the job under ``name`` before this returns it (decoded from
        that JSON), and a later run of the job gets the stored value back without
        calling ``fn``. An ``async def`` fn: ``await job.step(...)``.

        At least once: a crash between ``fn``'s return and the record's commit runs it
        again. With ``conn``, exactly once: ``fn`` runs inside a transaction on ``conn``
        (a ``sqlq.Transaction`` of this queue's database, or an ``sqlite3``, psycopg,
        Django or SQLAlchemy connection to it), and the record joins that transaction
        after the job's lease is checked in it (on PostgreSQL its row is locked until the
        commit). sqlq commits only a transaction it opened: in one of the caller's, the
        step is recorded when the caller commits.

        Raises:
            JobLost: the reservation was lost; nothing is recorded (JobCancelled, a
                JobLost, if the job was cancelled).
            JobTooBig: the value is larger than ``MAX_VALUE`` bytes of JSON, or the job
                keeps ``MAX_STEPS`` steps and cursors already (nothing is recorded).
            TypeError: the value cannot be stored as JSON (nothing is recorded).
            ValueError: this Job was peeked, not reserved; or a bad name.

        Examples:
            >>> charge = job.step("charge", payments.charge, order_id)
        """
        name = check_name(name)
        lease = self._lease()
        if conn is not None:
            return self._step_in(conn, lease, name, fn, args, kwargs)  # type: ignore[no-any-return]
        if inspect.iscoroutinefunction(fn):
            return self._step_async(name, fn, args, kwargs)  # type: ignore[return-value]
        value = self._recorded(STEP, name, room=True)
        if value is not MISSING:
            return value  # type: ignore[no-any-return]
        return self._keep(STEP, name, fn(*args, **kwargs))  # type: ignore[no-any-return]

    async def _step_async(self, name: str, fn: Callable[..., Awaitable[Any]],
                          args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        value = self._recorded(STEP, name, room=True)
        if value is not MISSING:
            return value
        return self._keep(STEP, name, await fn(*args, **kwargs))

    def _step_in(self, conn: Any, lease: int, name: str, fn: Callable[..., Any],
                 args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        """``step(conn=)``: the work and its record in one transaction on ``conn``."""
        import json
        if inspect.iscoroutinefunction(fn):
            raise TypeError("step(conn=) takes a plain function: its writes run in the "
                            "transaction")

        def work() -> str:
            return encode(fn(*args, **kwargs), name)

        kept, _, _ = self._queue.verbs_in(conn).run_step(self.id, lease, name, work, MAX_STEPS)
        self._done = None  # read again: the caller's transaction may yet roll back
        return json.loads(kept)

    def cursor(self, name: str, default: Any = None) -> Any:
        """The position last saved under ``name`` by :meth:`save_cursor` (in this run or an
        earlier one of the job), else ``default``.

        Examples:
            >>> start = job.cursor("row", 0)
        """
        value = self._recorded(CURSOR, check_name(name))
        return default if value is MISSING else value

    def save_cursor(self, name: str, value: Any) -> None:
        """Commit ``value`` (JSON) as the position ``name``: a later run of the job reads it
        with :meth:`cursor`. One small commit (the lease checked, one row written).

        Raises:
            JobLost: the reservation was lost; nothing is saved.
            JobTooBig: the value is too large, or the job keeps too many steps.
            TypeError: the value cannot be stored as JSON.

        Examples:
            >>> job.save_cursor("row", n)
        """
        name = check_name(name)
        kept, at = self._queue.verbs.record_step(self.id, self._lease(), CURSOR, name,
                                                 encode(value, name), MAX_STEPS)
        self._loaded()[(CURSOR, name)] = (kept, at)

    def snooze(self, seconds: float) -> None:
        """Give the job back, ready again after ``seconds``, as if this run had not been
        claimed: no attempt counted, the retry budget unchanged, its steps and cursors
        kept. The run should return at once; ``sqlq work`` records nothing of it.

        Raises:
            JobLost: the reservation was lost.
            ValueError: this Job was peeked, not reserved; or ``seconds`` out of range.

        Examples:
            >>> if not report_ready(): job.snooze(60); return
        """
        lease = self._lease()
        delay_ms = seconds_to_ms(seconds, "seconds")
        self._queue.verbs.snooze(self.id, lease, delay_ms)
        self.state = "delayed" if delay_ms else "ready"  # type: ignore[misc]  # a Job slot
        self._snoozed = True

    @property
    def steps(self) -> list[dict[str, Any]]:
        """The job's finished steps, in the order they finished: each a dict of ``name``,
        ``value`` and ``finished_at`` (ms since the epoch)."""
        import json
        done = self._loaded()
        return [{"name": name, "value": json.loads(value), "finished_at": at}
                for (kind, name), (value, at) in done.items() if kind == STEP]

    # -- the handle's copy of its job's rows --------------------------------------------------

    def _lease(self) -> int:
        return lease_of(self)

    def _loaded(self) -> dict[tuple[int, str], tuple[str, int]]:
        done = self._done
        if done is None:
            done = self._done = {(kind, name): (value, at) for kind, name, value, at
                                 in self._queue.views.steps(self.id)}
        return done

    def _recorded(self, kind: int, name: str, *, room: bool = False) -> Any:
        """The value recorded for (kind, name), decoded, or MISSING; ``room``: JobTooBig
        if it is missing and the job keeps MAX_STEPS rows already (before its fn runs)."""
        import json
        done = self._loaded()
        found = done.get((kind, name))
        if found is not None:
            return json.loads(found[0])
        if room and len(done) >= MAX_STEPS:
            raise JobTooBig(f"job {self.id} has {len(done)} steps and cursors, the most a job "
                            f"keeps; {name!r} is not run")
        return MISSING

    def _keep(self, kind: int, name: str, value: Any) -> Any:
        """Record ``value`` under the lease; the value kept (a step recorded already keeps
        its first), decoded."""
        import json
        kept, at = self._queue.verbs.record_step(self.id, self._lease(), kind, name,
                                                 encode(value, name), MAX_STEPS)
        self._loaded()[(kind, name)] = (kept, at)
        return json.loads(kept)


def lease_of(job: Durable) -> int:
    """The lease a reserved Job carries; ValueError for a peeked one (it has none)."""
    if job.lease is None:
        raise ValueError(f"job {job.id} is not reserved through this handle; "
                         "use the Queue's by-id verbs")
    return job.lease


__all__ = ["CURSOR", "MAX_NAME", "MAX_STEPS", "MAX_VALUE", "STEP", "Durable", "check_name",
           "encode", "lease_of", "rows_as_dicts", "snoozed"]
