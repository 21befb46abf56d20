"""The verbs that do not put or change jobs: subscriptions, limits and pauses, the
workers registry, the histories, and the looks of waiters and workers.

Each is a method here calling one storage method through the one
:class:`~sqlq.verbs.dispatch.Dispatcher`, with its :class:`Verb` record (as
``contract.py``'s verbs do): its transaction, its durability, its span. An operator's
or upkeep write has no operation type (``op=None``); the frequent looks that waiters
and workers make on their own (a result waiter's on every wake, a worker's heartbeat)
have no span, as the engine's HAS_READY has none. Arguments are checked here when more
than one face passes them (a tube, a topic, a limit); the faces shape what comes back.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from contextlib import AbstractContextManager, nullcontext
from typing import TYPE_CHECKING, Any

from ..core import tracing
from ..core.durations import now_ms
from ..model import DEFAULT_TUBE, check_tube
from .dispatch import READ, READIES, SEND, WRITE, Dispatcher, Verb, traced
from .views import OVERVIEW

if TYPE_CHECKING:
    from ..attempts import Attempt
    from ..backends import Backend
    from ..backends.store import Store
    from ..control import Progress
    from ..finished import Retention
    from ..model import Job, OnProgress
    from ..putting import Put
    from ..throughput import Minute

_NO_SPAN: AbstractContextManager[None] = nullcontext()

# -- the records, in the order of the methods below ------------------------------------------

SUBSCRIBE = Verb("subscribe", None, WRITE, timed=False)
UNSUBSCRIBE = Verb("unsubscribe", None, WRITE, timed=False)
SUBSCRIPTIONS = Verb("subscriptions", None, READ, timed=False)
LIMIT = Verb("limit", None, WRITE, timed=False, wakes=READIES)
LIMITS = Verb("limits", None, READ, timed=False)
PAUSE_TUBE = Verb("pause_tube", None, WRITE, wakes=READIES)
#: A periodic task's job and its slot, in one transaction (a put: its span is a send).
ENQUEUE_PERIODIC = Verb("enqueue_periodic", SEND, WRITE, wakes=READIES)
RECORD_DURATIONS = Verb("record_durations", None, WRITE, durable=False, timed=False,
                        span=False)
BEAT_WORKER = Verb("beat_worker", None, WRITE, durable=False, timed=False, span=False)
FORGET_WORKERS = Verb("forget_workers", None, WRITE, durable=False, timed=False, span=False)
LIST_WORKERS = Verb("list_workers", None, READ, timed=False, span=False)
THROUGHPUT_SAMPLED = Verb("throughput_sampled", None, READ, timed=False, span=False)
SAMPLE_THROUGHPUT = Verb("sample_throughput", None, WRITE, durable=False, timed=False,
                         span=False)
THROUGHPUT = Verb("throughput", None, READ, timed=False)
ATTEMPTS = Verb("attempts", None, READ, single=True, timed=False)
#: A retried run's link to its last failed run: a worker's look before each retry.
LAST_TRACE = Verb("last_trace", None, READ, single=True, timed=False, span=False)
#: A progress waiter's look, on every wake.
READ_PROGRESS = Verb("read_progress", None, READ, timed=False, span=False)
#: A worker's look for cancelled reservations, once a second while it runs jobs.
CANCELLED_AMONG = Verb("cancelled_among", None, READ, timed=False, span=False)
#: A result waiter's look, on every wake: the result and the ids issued, one snapshot.
LOOK_RESULT = Verb("look_result", None, READ, span=False)
#: ``sqlq serve``'s test of whether its cached counts still hold, around each count.
#: ``sqlq copy`` (and a PostgreSQL queue's backup): the target's one write transaction.
COPY = Verb("copy", None, WRITE, timed=False)
RETENTION = Verb("retention", None, WRITE, timed=False)
RETENTIONS = Verb("retentions", None, READ, timed=False, span=False)
#: Pruning (sqlq/finished.py): its reads, then short writes of a batch each, losable (a
#: pruned record comes back on power loss and is pruned again).
PRUNE_LOOK = Verb("prune_look", None, READ, timed=False, span=False)
PRUNE = Verb("prune", None, WRITE, durable=False, timed=False, span=False)

#: Every record here, to join the contract's (``verbs.VERBS``).
OPERATIONS = (SUBSCRIBE, UNSUBSCRIBE, SUBSCRIPTIONS, LIMIT, LIMITS, PAUSE_TUBE,
              ENQUEUE_PERIODIC, RECORD_DURATIONS, BEAT_WORKER, FORGET_WORKERS, LIST_WORKERS,
              THROUGHPUT_SAMPLED, SAMPLE_THROUGHPUT, THROUGHPUT, ATTEMPTS, LAST_TRACE,
              READ_PROGRESS, CANCELLED_AMONG, LOOK_RESULT, COPY, RETENTION, RETENTIONS,
              PRUNE_LOOK, PRUNE)


class Operations:
    """The operations of one Queue's backend (``Queue.operations``)."""

    __slots__ = ("dispatch", "store")

    def __init__(self, dispatch: Dispatcher, store: Store[Any]) -> None:
        self.dispatch = dispatch
        self.store = store

    # -- topics (a publish is contract.py's) -----------------------------------------------------

    def subscribe(self, topic: str, tube: str) -> None:
        """Make a publish to ``topic`` fill ``tube``; subscribing twice changes nothing."""
        check_tube(topic, "topic")
        check_tube(tube)
        self.dispatch.run(SUBSCRIBE, self.store.topics.subscribe, topic, tube)

    def unsubscribe(self, topic: str, tube: str) -> bool:
        """Stop filling ``tube`` from ``topic``; True if it was subscribed."""
        check_tube(topic, "topic")
        check_tube(tube)
        was: bool = self.dispatch.run(UNSUBSCRIBE, self.store.topics.unsubscribe, topic, tube)
        return was

    def subscriptions(self, topic: str | None) -> list[tuple[str, str]]:
        """(topic, tube) pairs, sorted; only ``topic``'s when given."""
        if topic is not None:
            check_tube(topic, "topic")
        pairs: list[tuple[str, str]] = self.dispatch.run(
            SUBSCRIPTIONS, self.store.topics.list_subscriptions, topic)
        return pairs

    # -- a tube's flow (sqlq/core/limits.py) -----------------------------------------------

    def limit(self, tube: str, concurrency: Any, rate: Any, group_concurrency: Any,
              group_rate: Any) -> dict[str, Any]:
        """Set (or with None remove) the tube's limits; an argument left as
        ``limits.KEEP`` stays as it is. The tube's limits after, as :meth:`limits` gives
        them (the group limits too if one was given). Checked whole before anything is
        written."""
        from ..core import limits

        check_tube(tube)
        given = {"concurrency": concurrency, "rate": rate,
                 "group_concurrency": group_concurrency, "group_rate": group_rate}
        new = {name: (limits.check_concurrency(value, name) if "concurrency" in name
                      else limits.check_rate(value, name))
               for name, value in given.items() if value is not limits.KEEP}
        rows = self.dispatch.run(LIMIT, self.store.limits.change_limits, tube, new)
        groups = "group_concurrency" in new or "group_rate" in new
        return limits.limits_doc(*rows[0][1:], groups=groups) if rows \
            else limits.limits_doc(None, None, None, groups=groups)

    def limits(self, tube: str | None = None) -> dict[str, dict[str, Any]]:
        """tube -> {"concurrency": K or None, "rate": (N, seconds) or None}, and
        ``group_concurrency`` and ``group_rate`` where a group limit is set, for every
        tube with limits (or only ``tube``)."""
        from ..core.limits import limits_doc

        rows = self.dispatch.run(LIMITS, self.store.limits.list_limits, tube)
        return {row[0]: limits_doc(*row[1:]) for row in rows}

    def retention(self, tube: str, max_age_ms: int | None, max_count: int | None) -> None:
        """Set how long a tube's finished records are kept ('' every tube's; both None:
        back to the default). Checked by the face."""
        self.dispatch.run(RETENTION, self.store.finished.set_retention, tube, max_age_ms,
                          max_count)

    def retentions(self) -> dict[str, Retention]:
        """'' (every tube's) and each tube set on its own -> its Retention."""
        from ..finished import settings

        return settings(self.dispatch.run(RETENTIONS, self.store.finished.retention))

    def prune(self, batch: int = 500, budget_s: float | None = None) -> dict[str, int]:
        """Delete finished records past their retention and expired results, ``batch``
        rows a transaction (no writer waits long behind one), until none is left or
        ``budget_s`` seconds have passed; then the file's free space is given back
        (``Backend.reclaim``: ``pages``). How many of each, and ``more``: 1 if the budget
        ran out first. Any process may run it at any time: two at once each delete what
        the other did not."""
        import time

        from ..finished import OUTCOMES

        now = self.dispatch.clock()
        stop = None if budget_s is None else time.monotonic() + budget_s
        kept = self.retentions()
        store = self.store.finished
        gone = {"finished": 0, "results": 0, "more": 0, "pages": 0}

        def drain(what: str, fn: Callable[..., int], *args: Any) -> bool:
            """Run one prune statement until it deletes less than a batch; False if the
            budget ran out first."""
            while (n := self.dispatch.run(PRUNE, fn, *args, batch)):
                gone[what] += n
                if n < batch:
                    break
                if stop is not None and time.monotonic() > stop:
                    gone["more"] = 1
                    return False
            return True

        for tube in self.dispatch.run(PRUNE_LOOK, store.tubes):
            rule = kept.get(tube, kept[""])
            for outcome in OUTCOMES:
                before = (now - int(rule.max_age * 1000), 0)
                cut = self.dispatch.run(PRUNE_LOOK, store.cutoff, tube, outcome, rule.max_count)
                if cut is not None:  # the newest record past the count: it goes too
                    before = max(before, (cut[0], cut[1] + 1))
                if not drain("finished", store.prune, tube, outcome, before):
                    return gone
        drain("results", self.store.results.purge, now)
        gone["pages"] = self.dispatch.backend.reclaim(stop)
        return gone

    def pause_tube(self, tube: str, pause_ms: int) -> None:
        """Reserve nothing from ``tube`` for ``pause_ms`` (checked by the face)."""
        self.dispatch.run(PAUSE_TUBE, self.store.limits.pause_tube, tube, pause_ms)

    # -- what ``sqlq work`` writes: periodic jobs, histograms, the workers registry -----------

    def enqueue_periodic(self, put: Put, body: bytes, name: str, slot_ms: int) -> int | None:
        """Put periodic task ``name``'s job for the slot starting at ``slot_ms`` unless that
        slot (or a later one) was enqueued already; the new job's id, or None."""
        ids: list[int] = self.dispatch.run(ENQUEUE_PERIODIC, self.store.put_periodic, put,
                                           body, name, slot_ms)
        return ids[0] if ids else None

    def record_durations(self, rows: Sequence[tuple[str, str, str, int, float]]) -> None:
        """Add a worker's histogram rows (``Tally.rows()``) in one short write."""
        self.dispatch.run(RECORD_DURATIONS, self.store.history.add_durations, rows)

    def beat_worker(self, params: dict[str, Any]) -> None:
        """Write a worker's row (registering it if it has none): sqlq/core/registry.py."""
        self.dispatch.run(BEAT_WORKER, self.store.workers.beat_worker, params)

    def forget_workers(self, tokens: list[str]) -> None:
        """Delete these workers' rows (one stops; a sweep of dead ones)."""
        self.dispatch.run(FORGET_WORKERS, self.store.workers.forget_workers, tokens)

    def sweep_workers(self) -> int:
        """Delete the rows of workers that are not alive (``Views.workers`` skips them);
        how many."""
        from ..core.registry import Registered, alive

        rows = [Registered.from_row(r)
                for r in self.dispatch.run(LIST_WORKERS, self.store.workers.list_workers)]
        backend = self.dispatch.backend
        kept = {r.token for r in alive(rows, backend.live_owners([r.token for r in rows])
                                        if rows else ())}
        gone = [r.token for r in rows if r.token not in kept]
        if gone:
            self.forget_workers(gone)
        return len(gone)

    def sample_throughput(self, now: int) -> bool:
        """Take this minute's throughput sample unless one was taken; True if this call
        took it (sqlq/throughput.py)."""
        from .. import observe  # the dashboard's reads: not loaded with the Queue
        from ..throughput import KEEP_MINUTES, MINUTE_MS

        minute = now // MINUTE_MS
        if self.dispatch.run(THROUGHPUT_SAMPLED, self.store.history.throughput_sampled,
                             minute):
            return False
        view = observe.overview_of(now, self.dispatch.run(OVERVIEW, self.store.overview,
                                                          (DEFAULT_TUBE,)))
        params = {"minute": minute, "at": now, "puts": view.puts_total,
                  "deletes": view.deletes_total,
                  "buries": sum(t.buries_total for t in view.tubes)}
        self.dispatch.run(SAMPLE_THROUGHPUT, self.store.history.add_throughput, params,
                          minute - KEEP_MINUTES)
        return True

    # -- reads -----------------------------------------------------------------------------------

    def throughput(self, minutes: int) -> list[Minute]:
        """The per-minute rates over the last ``minutes`` minutes, oldest first."""
        from ..throughput import MINUTE_MS, rates

        since = self.dispatch.clock() // MINUTE_MS - minutes
        return rates(self.dispatch.run(THROUGHPUT, self.store.history.list_throughput, since))

    def attempts(self, job_id: int) -> list[Attempt]:
        """The job's kept attempts, oldest first."""
        from ..attempts import Attempt

        rows = self.dispatch.run(ATTEMPTS, self.store.history.attempts, job_id)
        return [Attempt.from_row(row) for row in rows]

    def last_trace(self, job_id: int) -> str | None:
        """The traceparent of the job's latest failed run that kept one (a traced run), or
        None: what the span of its next run links (sqlq/core/tracing.py)."""
        trace: str | None = self.dispatch.run(LAST_TRACE, self.store.history.attempt_trace,
                                              job_id)
        return trace

    def processing(self, job: Job) -> AbstractContextManager[None]:
        """The ``process`` span of a worker's run of job (reserved), when verbs get spans
        (the dispatcher's one test): linked to its previous failed run's, looked up here
        for a retry. Every worker enters it around the run; without a tracer it is an
        empty context, shared."""
        if not traced():
            return _NO_SPAN
        return tracing.processing(job, self.last_trace(job.id) if job.reserves > 1 else None)

    def read_progress(self, job_id: int) -> tuple[Progress, str] | None:
        """(progress, message) of a live job ((None, "") before any); None: no such job."""
        from ..control import decode_progress

        row = self.dispatch.run(READ_PROGRESS, self.store.control.job_progress, job_id)
        return None if row is None else (decode_progress(row[0]), row[1] or "")

    def cancelled_among(self, leases: Iterable[tuple[int, int]]) -> list[int]:
        """Which of these (id, lease) reservations were cancelled: one read of a small
        table."""
        held = dict(leases)
        if not held:
            return []
        rows = self.dispatch.run(CANCELLED_AMONG, self.store.control.cancelled_among,
                                 list(held))
        return [job_id for job_id, lease in rows if held.get(job_id) == lease]

    def look_result(self, job_id: int) -> bytes | None:
        """The job's result, or None while it is pending; JobBuried or JobNotFound when it
        will never have one (sqlq/results.py)."""
        from ..results import decide

        outcome, issued = self.dispatch.run(LOOK_RESULT, self.store.results.look, job_id)
        return decide(job_id, outcome, issued)


def copy_between(source: Backend, target: Backend, page: int,
                 progress: OnProgress | None = None) -> tuple[dict[str, int], int] | None:
    """Copy every job and all queue state from ``source`` into the empty ``target``
    (``Store.copy_from``, which calls ``progress`` after each page of jobs): one
    transaction on each side, a consistent source and an all-or-nothing target. The
    one verb on two backends: the dispatcher runs a verb on one, so the source's
    snapshot is opened here and read from inside the target's verb. None, with nothing
    written, when the target holds anything."""
    with source.transaction() as source_conn:
        source.store.copying.begin_snapshot(source_conn)
        copied: tuple[dict[str, int], int] | None = Dispatcher(target, now_ms).run(
            COPY, target.store.copy_from, source.store, source_conn, page, progress)
        return copied


class ProgressWatch:
    """What a ``result(on_progress=callback)`` waiter does at each look: read the job's
    progress (one primary-key read; the waiter looks when a commit may have changed
    something, so it sees progress writes as they commit) and call ``callback(value,
    message)`` with each new one. ``call`` runs the callback (AsyncQueue: on its loop)."""

    def __init__(self, operations: Operations, job_id: int,
                 callback: Callable[[Progress, str], Any],
                 call: Callable[[Callable[[Progress, str], Any], Progress, str], Any] | None
                 = None) -> None:
        self._operations = operations
        self._job_id = job_id
        self._callback = callback
        self._call = call
        self._seen: tuple[Progress, str] | None = None

    def look(self) -> None:
        found = self._operations.read_progress(self._job_id)
        if found is None or found[0] is None or found == self._seen:
            return
        self._seen = found
        if self._call is None:
            self._callback(*found)
        else:
            self._call(self._callback, *found)
