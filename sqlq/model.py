"""The job model: states, the Job handle, and the rules arguments must follow."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any, NamedTuple, Protocol

from .core.durations import seconds_to_ms
from .errors import InvalidTube, JobNotFound, JobTooBig
from .steps import Durable, StepsQueue, StepVerbs, lease_of

READY, DELAYED, RESERVED, BURIED, WAITING = 0, 1, 2, 3, 4
#: A job's state by its number; waiting (4): put with ``after=`` parents not yet gone.
STATE_NAMES = ("ready", "delayed", "reserved", "buried", "waiting")

DEFAULT_TUBE = "default"
DEFAULT_PRIORITY = 1024
DEFAULT_TTR = 60.0
DEFAULT_TTR_MS = int(DEFAULT_TTR * 1000)
MAX_PRIORITY = 2**32 - 1
DEFAULT_MAX_JOB_SIZE = 1 << 20
MAX_JOB_ID = 2**63 - 1  # SQLite's largest integer: a larger id names no job
#: Characters kept of one message: a failed attempt's error and message
#: (sqlq/attempts.py), and a bury reason, whoever gives it (cut by :func:`cap`).
MESSAGE_LIMIT = 1024

_TUBE = re.compile(r"[A-Za-z0-9\-+/;.$_()]{1,200}")


class JobRow(NamedTuple):
    """A job as store.jobs.select_job reads it (state as of now)."""

    id: int
    tube: str
    priority: int
    state: int
    ttr: int
    body: bytes
    created_at: int
    reserves: int
    timeouts: int
    releases: int
    buries: int
    kicks: int
    delay_until: int | None
    reserved_until: int | None
    bury_reason: str | None
    unique_key: str | None
    delay: int  # ms, as last set by put or release
    grp: str | None = None  # its group (a list query's rows leave it out)


class ClaimRow(NamedTuple):
    """A job as a claim reserves it: the columns of ``claim_job``'s RETURNING (and of every
    claim: ``claim_jobs``, ``claim_job_by_id``, ``delete_and_claim``), in that order.
    Every store's claim verb returns these, for :meth:`Job.from_claim`."""

    id: int
    tube: str
    priority: int
    ttr: int  # ms
    body: bytes
    created_at: int
    reserves: int
    timeouts: int
    releases: int
    buries: int
    kicks: int
    lease: int
    reserved_until: int
    unique_key: str | None
    delay: int  # ms, as last set by put or release
    trace: str | None  # the producer's W3C trace context (sqlq/core/tracing.py), or None
    grp: str | None = None  # its group (sqlq/groups.py), or None


class LeaseVerbs(StepVerbs, Protocol):
    """The verbs a reserved :class:`Job` settles through with its (valid) id and lease,
    skipping the Queue's argument checks (``verbs/contract.py``'s ``Verbs``)."""

    def delete(self, job_id: int, lease: int | None, *, tube: str | None = None,
               reserves: int | None = None) -> str: ...

    def complete(self, job_id: int, lease: int | None, result: bytes, ttl_ms: int, *,
                 reserves: int | None = None) -> str: ...

    def release(self, job_id: int, lease: int | None, priority: int | None,
                delay_ms: int, lease_end: int | None = None) -> None: ...

    def touch(self, job_id: int, lease: int | None, lease_end: int | None = None) -> int: ...


class Settles(StepsQueue, Protocol):
    """What a :class:`Job` asks of the queue that reserved it: the by-id verbs its own
    verbs pass their lease to (``Queue`` offers them) and the verb contract beneath. A
    protocol here, so the job model stands below the queue that hands jobs out."""

    @property
    def verbs(self) -> LeaseVerbs: ...

    max_job_size: int
    result_ttl_ms: int

    def delete(self, job_id: int, *, lease: int | None = None) -> None: ...

    def release(self, job_id: int, *, priority: int | None = None, delay: float = 0,
                lease: int | None = None) -> None: ...

    def bury(self, job_id: int, *, priority: int | None = None, reason: str | None = None,
             lease: int | None = None) -> None: ...

    def touch(self, job_id: int, *, lease: int | None = None) -> int: ...

    def progress(self, job_id: int, value: float, message: str | None = None, *,
                 lease: int | None = None) -> None: ...


class Job(Durable):
    """A job as returned by ``reserve`` or ``peek``.

    A reserved Job carries the lease of that reservation: its ``delete``,
    ``release``, ``bury``, ``touch`` and ``complete`` act only while the lease is
    live and raise :class:`sqlq.JobLost` otherwise. A peeked Job has no lease;
    use the Queue's by-id verbs to act on it as an administrator. A reserved Job's
    ``step``, ``cursor``, ``save_cursor``, ``snooze`` and ``steps`` make a long job
    resume where it stopped (sqlq/steps.py, docs/workflows.md).

    Attributes: ``id``, ``tube``, ``body`` (bytes), ``priority``, ``ttr`` (seconds),
    ``state`` (``ready``, ``delayed``, ``reserved``, ``buried``; ``deleted`` after
    this handle deleted it), the counters ``reserves``, ``timeouts``, ``releases``,
    ``buries``, ``kicks``, ``lease``, ``bury_reason``, ``unique_key``, ``group`` (the
    job's group, a str, or None: see ``put``'s ``group``), and the times
    ``created_at``, ``delay_until``, ``reserved_until`` (ms since the epoch),
    ``delay`` (seconds: the delay last given by put or release, 0 for none), and
    ``trace``: the W3C trace context its put stored under a recording OpenTelemetry
    span (``traceparent``, then a newline and ``tracestate`` if any), read by a
    reserve; None for a job put untraced, and on a peeked job (see docs/tracing.md).

    Examples:
        >>> job = q.reserve(tubes="emails", timeout=5)
        >>> job.id, job.tube, job.json()
        (2, 'emails', {'to': 'a@example.com'})
        >>> job.delete()
    """

    __slots__ = ("_queue", "id", "tube", "body", "priority", "ttr", "state", "reserves",
                 "timeouts", "releases", "buries", "kicks", "lease", "created_at",
                 "delay_until", "reserved_until", "bury_reason", "unique_key", "delay", "trace",
                 "group")
    _queue: Settles

    def __init__(self, queue: Settles, *, id: int, tube: str, body: bytes, priority: int,
                 ttr_ms: int, state: str, reserves: int = 0, timeouts: int = 0,
                 releases: int = 0, buries: int = 0, kicks: int = 0, lease: int | None = None,
                 created_at: int = 0, delay_until: int | None = None,
                 reserved_until: int | None = None, bury_reason: str | None = None,
                 unique_key: str | None = None, delay_ms: int = 0,
                 trace: str | None = None, group: str | None = None) -> None:
        self._queue = queue
        self.id = id
        self.tube = tube
        self.body = body
        self.priority = priority
        self.ttr = ttr_ms / 1000
        self.state = state
        self.reserves = reserves
        self.timeouts = timeouts
        self.releases = releases
        self.buries = buries
        self.kicks = kicks
        self.lease = lease
        self.created_at = created_at
        self.delay_until = delay_until
        self.reserved_until = reserved_until
        self.bury_reason = bury_reason
        self.unique_key = unique_key
        self.delay = delay_ms / 1000
        self.trace = trace
        self._done = None
        self._snoozed = False
        self.group = group

    @classmethod
    def from_claim(cls, queue: Settles, row: ClaimRow) -> Job:
        """A reserved Job from a claim's row.

        The same Job as ``__init__`` makes, built without its keyword call: every claim
        makes one per job, and a batch worker's per-job cost is mostly Python."""
        # One unpacking, not 17 attribute reads of the row (a namedtuple's fields are
        # descriptors that Python 3.11 does not specialise): 17 columns always, the
        # claims' RETURNING (tests/unit/test_claim_row.py).
        (job_id, tube, priority, ttr, body, created_at, reserves, timeouts, releases, buries,
         kicks, lease, reserved_until, unique_key, delay, trace, grp) = row
        job = cls.__new__(cls)
        job._queue = queue
        job.id = job_id
        job.tube = tube
        job.body = body
        job.priority = priority
        job.ttr = ttr / 1000
        job.state = "reserved"
        job.reserves = reserves
        job.timeouts = timeouts
        job.releases = releases
        job.buries = buries
        job.kicks = kicks
        job.lease = lease
        job.created_at = created_at
        job.delay_until = None
        job.reserved_until = reserved_until
        job.bury_reason = None
        job.unique_key = unique_key
        job.delay = delay / 1000
        job.trace = trace
        job._done = None
        job._snoozed = False
        job.group = grp
        return job

    @classmethod
    def from_row(cls, queue: Settles, row: JobRow) -> Job:
        return cls(queue, id=row.id, tube=row.tube, body=row.body, priority=row.priority,
                   ttr_ms=row.ttr, state=STATE_NAMES[row.state], reserves=row.reserves,
                   timeouts=row.timeouts, releases=row.releases, buries=row.buries,
                   kicks=row.kicks, created_at=row.created_at, delay_until=row.delay_until,
                   reserved_until=row.reserved_until, bury_reason=row.bury_reason,
                   unique_key=row.unique_key, delay_ms=row.delay, group=row.grp)

    def __repr__(self) -> str:
        return f"<Job {self.id} tube={self.tube!r} state={self.state} priority={self.priority}>"

    def json(self) -> Any:
        """The body decoded as JSON."""
        import json  # not every process decodes JSON: a put costs no json import

        return json.loads(self.body)

    def text(self) -> str:
        """The body decoded as UTF-8."""
        return self.body.decode()

    def delete(self) -> None:
        """Delete the job; it is done.

        Raises:
            JobLost: the reservation was lost (TTR ran out, or reserved again);
                JobCancelled, a JobLost, if the job was cancelled.
            ValueError: this Job was peeked, not reserved (use ``Queue.delete(id)``).
        """
        lease = self.lease
        self._queue.verbs.delete(self.id, lease_of(self) if lease is None else lease,
                                 tube=self.tube, reserves=self.reserves)
        self.state = "deleted"

    def release(self, priority: int | None = None, delay: float = 0) -> None:
        """Put the reserved job back: ready, or delayed by ``delay`` seconds.

        Raises:
            JobLost: the reservation was lost (TTR ran out, or reserved again);
                JobCancelled, a JobLost, if the job was cancelled.
            ValueError: this Job was peeked, not reserved.
        """
        lease = lease_of(self)
        if priority is not None:
            check_priority(priority)
        self._queue.verbs.release(self.id, lease, priority, seconds_to_ms(delay, "delay"),
                                  self.reserved_until)
        self.state = "delayed" if delay else "ready"

    def bury(self, priority: int | None = None, reason: str | None = None) -> None:
        """Park the job until someone kicks it; ``reason`` is kept and shown by peek.

        Raises:
            JobLost: the reservation was lost (TTR ran out, or reserved again);
                JobCancelled, a JobLost, if the job was cancelled.
            ValueError: this Job was peeked, not reserved.

        Examples:
            >>> job.bury(reason="ValueError: cannot deliver")
        """
        self._queue.bury(self.id, priority=priority, reason=reason, lease=lease_of(self))
        self.state = "buried"
        self.bury_reason = cap_reason(reason)

    def touch(self) -> None:
        """Ask for more time: the reservation now ends ttr seconds from now.

        Raises:
            JobLost: the reservation was lost (TTR ran out, or reserved again);
                JobCancelled, a JobLost, if the job was cancelled.
            ValueError: this Job was peeked, not reserved.
        """
        self.reserved_until = self._queue.verbs.touch(self.id, lease_of(self),
                                                      self.reserved_until)

    def progress(self, value: float, message: str | None = None) -> None:
        """Say how far the job has got: ``value`` a fraction 0-1 (float) or a count of
        things done (int), ``message`` a short line; anyone reads them
        (``stats_job(id)["progress"]``, ``sqlq peek``, the dashboard, ``result()``).

        Raises:
            JobCancelled: the job was cancelled (stop working on it).
            JobLost: the reservation was lost (TTR ran out, or reserved again).
            ValueError: this Job was peeked, not reserved; or a value out of range.

        Examples:
            >>> job.progress(0.25, "resizing 1 of 4")
        """
        self._queue.progress(self.id, value, message, lease=lease_of(self))

    def complete(self, result: bytes | str = b"") -> None:
        """Delete the job and store its result (see Queue.result), in one transaction.

        Raises:
            JobLost: the reservation was lost (TTR ran out, or reserved again);
                JobCancelled, a JobLost, if the job was cancelled.
            JobTooBig: the result is larger than the Queue's ``max_job_size``.
            ValueError: this Job was peeked, not reserved.

        Examples:
            >>> job.complete(b'{"square": 49}')
        """
        queue, lease = self._queue, lease_of(self)
        data = check_body(result, queue.max_job_size, "result")
        queue.verbs.complete(self.id, lease, data, queue.result_ttl_ms, reserves=self.reserves)
        self.state = "deleted"


def cap(text: str, limit: int) -> str:
    """``text`` if it has at most ``limit`` characters, else its first quarter and last
    three quarters with a line between them saying how much was left out (the end of
    a traceback is where the error is; its start says where the run began)."""
    if len(text) <= limit:
        return text
    head = limit // 4
    tail = limit - head - 64
    cut = len(text) - head - tail
    return f"{text[:head]}\n[... {cut} characters left out ...]\n{text[-tail:]}"


def cap_reason(reason: str | None) -> str | None:
    """A bury reason as it is kept: at most :data:`MESSAGE_LIMIT` characters (:func:`cap`)."""
    return None if reason is None else cap(reason, MESSAGE_LIMIT)


#: The record's fields of a Job (what AsyncJob reads through), in slot order.
JOB_FIELDS = tuple(name for name in Job.__slots__ if not name.startswith("_"))


# -- argument rules ----------------------------------------------------------------------------

#: The most jobs one reserve_many claims (PostgreSQL's LIMIT takes an integer).
MAX_BATCH = 2**31 - 1


def check_batch_size(n: object) -> int:
    """reserve_many's n: an int of at least 1."""
    if isinstance(n, bool) or not isinstance(n, int):
        raise TypeError(f"n must be an int, not {type(n).__name__}")
    if n < 1:
        raise ValueError(f"n must be >= 1, not {n}")
    return min(n, MAX_BATCH)


_known_tubes: set[str] = set()


def check_tube(tube: object, name: str = "tube") -> str:
    """A valid tube (or topic: ``name``) name, or InvalidTube/TypeError naming ``name``."""
    # The hot path: a put to a tube already seen. The class test comes first, so an
    # unhashable argument (a list) gets the TypeError below, not "unhashable type".
    if tube.__class__ is str and tube in _known_tubes:
        return tube
    if not isinstance(tube, str):
        raise TypeError(f"{name} must be a str, not {type(tube).__name__}")
    if not _TUBE.fullmatch(tube) or tube.startswith("-"):
        raise InvalidTube(
            f"invalid {name} {tube!r}: 1-200 characters of A-Z a-z 0-9 - + / ; . $ _ ( ), "
            "not starting with -"
        )
    if len(_known_tubes) < 10_000:
        _known_tubes.add(tube)
    return tube


def check_tubes(tubes: object) -> list[str]:
    if tubes is None:
        return [DEFAULT_TUBE]
    if isinstance(tubes, str):
        return [check_tube(tubes, "tubes")]
    if isinstance(tubes, bytes):
        raise TypeError("tubes must be a str or a sequence of str, not bytes")
    try:
        checked = [check_tube(t, "tubes") for t in tubes]  # type: ignore[attr-defined]
    except TypeError:
        raise TypeError(f"tubes must be a str or a sequence of str, not {type(tubes).__name__}"
                        ) from None
    if not checked:
        raise ValueError("tubes must name at least one tube")
    return list(dict.fromkeys(checked))


def check_int(value: object, name: str) -> int:
    """An int argument (not a bool): a str or a float would otherwise reach the database,
    match nothing and read as "not found", hiding the caller's bug."""
    if value.__class__ is not int and (isinstance(value, bool) or not isinstance(value, int)):
        raise TypeError(f"{name} must be an int, not {type(value).__name__}")
    return value


def job_id_in_range(job_id: object) -> bool:
    """Whether ``job_id`` can name a job (1 to MAX_JOB_ID); TypeError if it is not an int.

    An id out of that range is not a usage error but a job that does not exist, as
    beanstalkd answers NOT_FOUND: ``peek`` returns None, the other by-id verbs raise
    JobNotFound (the CLI's exit 3), instead of the driver's OverflowError past 2**63.
    """
    return 0 < check_int(job_id, "job_id") <= MAX_JOB_ID


def check_job_id(job_id: object) -> int:
    """``job_id`` for a by-id verb; JobNotFound when no job can have it (job_id_in_range)."""
    if not job_id_in_range(job_id):
        raise JobNotFound(f"job {job_id} not found")
    return job_id  # type: ignore[return-value]


def check_lease(lease: object) -> int | None:
    """A lease token, or None for an administrator's by-id verb."""
    return None if lease is None else check_int(lease, "lease")


#: The longest ``by=`` a delete or cancel keeps in the job's record.
MAX_BY = 200


def check_by(by: object) -> str | None:
    """Who deletes or cancels a job by id (kept in its record), or None."""
    if by is None:
        return None
    if not isinstance(by, str):
        raise TypeError(f"by must be a str or None, not {type(by).__name__}")
    if not by or len(by) > MAX_BY:
        raise ValueError(f"by must be 1 to {MAX_BY} characters")
    return by


def check_priority(priority: object, name: str = "priority") -> int:
    if isinstance(priority, bool) or not isinstance(priority, int):
        raise TypeError(f"{name} must be an int, not {type(priority).__name__}")
    if not 0 <= priority <= MAX_PRIORITY:
        raise ValueError(f"{name} must be between 0 and {MAX_PRIORITY}, not {priority}")
    return priority


def check_ttr(ttr: object) -> int:
    """TTR in ms; like beanstalkd, anything under a second is raised to one second."""
    if ttr == DEFAULT_TTR and ttr.__class__ is float:
        return DEFAULT_TTR_MS
    return seconds_to_ms(ttr, "ttr", minimum=1.0)


def check_body(body: object, max_size: int, name: str = "body") -> bytes:
    """A job body (or result: ``name``) as bytes, str UTF-8 encoded; JobTooBig past max_size."""
    if isinstance(body, str):
        body = body.encode()
    elif isinstance(body, (bytearray, memoryview)):
        body = bytes(body)
    elif not isinstance(body, bytes):
        raise TypeError(f"{name} must be bytes or str, not {type(body).__name__}")
    if len(body) > max_size:
        raise JobTooBig(f"{'job body' if name == 'body' else name} is {len(body)} bytes, "
                        f"more than the maximum of {max_size}")
    return body


#: How long work tells how far it has got (``sqlq copy``, ``backup``, ``put-many``):
#: ``(count done so far, fraction of the whole or None when the whole is not known)``.
#: The command line draws it as a bar (sqlq/cli/progress.py).
OnProgress = Callable[[int, float | None], None]
