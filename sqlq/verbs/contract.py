"""The verb contract: every verb of sqlq that changes jobs, each defined once.

A verb is a method here: its storage call (the backend's ``Store``, one named statement
or a few per dialect) and its :class:`~sqlq.verbs.dispatch.Verb` record (its transaction,
its span, its lost-connection rule), run by the one :class:`Dispatcher`. Arguments arrive
checked (``put.describe``, ``model.check_*``) and in the storage's units (ms); the faces
(``Queue``, ``AsyncQueue``, ``Job``, the CLI, ``sqlq serve``, the dashboard's actions,
``sqlq.put(conn)``, Django and Flask) check and shape, then call one verb. Claims and the
waits around them are the reservation engine's (``engine.py``), through the same
dispatcher.

A new verb ("extend a job's delay", say) is one method and one record here, one
statement per dialect (``backends/*/queries.sql``, called by a Store method), and one
line per face (docs/internals.md, "Where a new verb goes").
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from ..backends.group import Batch
from ..errors import JobLost
from ..putting import Put
from .dispatch import FREES, READ, READIES, SEND, SETTLE, SHARED, WRITE, Dispatcher, Verb

if TYPE_CHECKING:
    from ..backends.base import Conn
    from ..backends.store import Store

# -- the records, in the order of the methods below ------------------------------------------

#: A put whose insert is one statement (no unique key, no parents): group commit may
#: run the puts of several threads as one statement.
PUT = Verb("put", SEND, SHARED, single=True, wakes=READIES)
#: A put that reads first (a unique key held, parents still live).
PUT_CHECKED = Verb("put", SEND, SHARED, wakes=READIES)
PUT_MANY = Verb("put_many", SEND, SHARED, wakes=READIES)
PUBLISH = Verb("publish", SEND, SHARED, wakes=READIES)
#: A delete: one statement where the store's is (``JobStore.ONE_STATEMENT_DELETE``; each
#: Verbs makes its own record with ``single`` set so).
DELETE = Verb("delete", SETTLE, SHARED, single=True, ack=True, wakes=FREES)
RELEASE = Verb("release", SETTLE, WRITE, durable=False, single=True, ack=True,
               wakes=READIES)
BURY = Verb("bury", SETTLE, SHARED, single=True, ack=True, wakes=FREES)
TOUCH = Verb("touch", SETTLE, WRITE, durable=False, single=True, ack=True)
COMPLETE = Verb("complete", SETTLE, SHARED, ack=True, wakes=READIES)
PROGRESS = Verb("progress", None, WRITE, durable=False, single=True)
CANCEL = Verb("cancel", None, WRITE)
KICK = Verb("kick", None, WRITE, wakes=READIES)
KICK_JOB = Verb("kick_job", None, SHARED, single=True, wakes=READIES)
POSTPONE = Verb("postpone", None, SHARED, single=True, wakes=READIES)
GIVE_BACK = Verb("give_back", None, WRITE, durable=False, timed=False, wakes=READIES)
#: A step's value or a cursor's position recorded under the job's lease (sqlq/steps.py).
RECORD_STEP = Verb("record_step", None, SHARED)
#: A step whose work writes in the same transaction (``job.step(conn=)``), on the
#: application's connection (an OnConnection dispatcher) or in a Queue's transaction.
RUN_STEP = Verb("run_step", None, WRITE)
#: A reserved job given back for a while, its claim not counted (``job.snooze``).
SNOOZE = Verb("snooze", SETTLE, WRITE, durable=False, ack=True, wakes=FREES)
#: After a delete cut off by a lost connection found its job gone: did its first attempt
#: delete it? (the finished records; see :func:`done_under`).
DONE_UNDER = Verb("done_under", None, READ, span=False)

#: Every record, for tests and docs: one name, one meaning.
VERBS = (PUT, PUT_CHECKED, PUT_MANY, PUBLISH, DELETE, RELEASE, BURY, TOUCH, COMPLETE,
         PROGRESS, CANCEL, KICK, KICK_JOB, POSTPONE, GIVE_BACK, RECORD_STEP, RUN_STEP, SNOOZE,
         DONE_UNDER)


class Verbs:
    """The verbs of one Queue's backend (``Queue._verbs``; the engine claims)."""

    __slots__ = ("dispatch", "store", "_puts", "_delete")

    def __init__(self, dispatch: Dispatcher, store: Store[Any]) -> None:
        self.dispatch = dispatch
        self.store = store
        self._delete = DELETE._replace(single=store.jobs.ONE_STATEMENT_DELETE)
        #: How plain puts of several threads sharing one commit go in together.
        self._puts = Batch(self._insert_puts, store.jobs.ONE_STATEMENT_PUTS)

    # -- producing ---------------------------------------------------------------------------

    def put(self, put: Put, body: bytes) -> int:
        """Insert one job as ``put`` says; its id (with a unique key held: the holder's)."""
        if put.unique_key is not None or put.parents or put.group is not None:
            ids: list[int] = self.dispatch.run(PUT_CHECKED, self.store.put, put, (body,))
        else:
            ids = self.dispatch.run_batched(PUT, self._puts, self.store.put, put, (body,))
        return ids[0]

    def _insert_puts(self, conn: Conn, items: list[tuple[Put, tuple[bytes]]]
                     ) -> list[list[int]]:
        """The plain puts of several threads sharing one commit (each its ``put``'s
        arguments), in one call; each put's value as ``Store.put`` gives it."""
        now = self.dispatch.clock()
        ids = self.store.jobs.insert_puts(conn, now, [
            (put.tube, put.priority, put.delay_ms, put.ttr_ms, bodies[0])
            for put, bodies in items])
        if now >= self.store.groups.look_at:  # puts into grouped tubes get turns
            for (put, _), job_id in zip(items, ids, strict=True):
                self.store.grouped(conn, now, put.tube, None, [job_id])
        return [[job_id] for job_id in ids]

    def put_many(self, put: Put, bodies: Sequence[bytes]) -> list[int]:
        """Insert one job per body as ``put`` says, all or none; their ids in order."""
        if not bodies:
            return []
        ids: list[int] = self.dispatch.run(PUT_MANY, self.store.put, put, bodies)
        return ids

    def publish(self, put: Put, body: bytes) -> list[tuple[str, int]]:
        """One copy of the job in every tube subscribed to the topic ``put.tube``, in one
        transaction; (tube, id) in tube-name order."""
        copies: list[tuple[str, int]] = self.dispatch.run(PUBLISH, self.store.publish, put,
                                                          body)
        return copies

    # -- settling a reservation (``lease`` None: an operator's, by id) -------------------------

    def delete(self, job_id: int, lease: int | None, by: str | None = None, *,
               tube: str | None = None, reserves: int | None = None) -> str:
        """Delete a job (a reserved one under ``lease``; without one, ``by`` is who asked,
        kept in its record); its tube ('' where the backend's worker's delete does not
        say: SQLite's). ``tube``: the job's, if the caller knows it (a Job handle), for
        the span, which then needs nothing back from the delete. ``reserves``: the
        handle's, to tell a delete cut off by a lost connection that committed
        (:func:`done_under`: then it returns as if it had not been cut off)."""
        if by is None:  # the worker's ack: no argument more than it had
            try:
                gone: str = self.dispatch.run(self._delete, self.store.jobs.delete, job_id, lease,
                                              tube=tube)
            except JobLost as e:
                if not self._ended_by_cut(e, job_id, reserves):
                    raise
                gone = tube or ""
        else:
            gone = self.dispatch.run(self._delete, self.store.jobs.delete, job_id, lease, by,
                                     tube=tube)
        return gone

    def deleted_by(self, reservations: Sequence[tuple[int, int]]) -> set[int]:
        """Of jobs found gone after a commit that deleted them was cut off, (id, the
        handle's reserves): those that commit deleted (:func:`done_under`). For a face
        that makes each acknowledgement again itself (a worker whose delete-and-claim
        was cut off: a claim is never made twice)."""
        return done_under(self.dispatch, self.store, reservations)

    def release(self, job_id: int, lease: int | None, priority: int | None,
                delay_ms: int, lease_end: int | None = None) -> None:
        """Put a reserved job back: ready, or delayed by ``delay_ms``. ``lease_end``: as
        touch's (a worker giving back its jobs as it stops)."""
        self._under(lease_end).run(RELEASE, self.store.jobs.release, job_id, lease, priority,
                                   delay_ms)

    def bury(self, job_id: int, lease: int | None, priority: int | None,
             reason: str | None) -> None:
        """Park a reserved job until kicked, with ``reason``."""
        self.dispatch.run(BURY, self.store.jobs.bury, job_id, lease, priority, reason)

    def touch(self, job_id: int, lease: int | None, lease_end: int | None = None) -> int:
        """Restart a reservation's TTR; the new deadline (ms). ``lease_end``: the holder's
        (ms): a lost server is waited for no longer (Dispatcher.within)."""
        backend = self.dispatch.backend
        if backend.current_owner() is not None:
            # A heartbeat between reserves: the backend may find its registration lost
            # (the SQLite sidecar deleted) and register again.
            backend.owner_token()
        deadline: int = self._under(lease_end).run(TOUCH, self.store.jobs.touch, job_id, lease)
        return deadline

    def _under(self, lease_end: int | None) -> Dispatcher:
        """The dispatcher for a holder's verb under a lease ending at ``lease_end`` (ms;
        None: not known), which waits for a lost server no longer (Dispatcher.within)."""
        return self.dispatch if lease_end is None else self.dispatch.within(lease_end)

    def complete(self, job_id: int, lease: int | None, result: bytes, ttl_ms: int, *,
                 reserves: int | None = None) -> str:
        """Delete the job and keep ``result`` for ``ttl_ms``; its tube ('' when a cut-off
        first attempt was found to have done it). ``reserves``: as :meth:`delete`'s (the
        result was committed with the job's record)."""
        try:
            tube: str = self.dispatch.run(COMPLETE, self.store.results.complete, job_id, lease,
                                          result, ttl_ms)
        except JobLost as e:
            if not self._ended_by_cut(e, job_id, reserves):
                raise
            tube = ""
        return tube

    def _ended_by_cut(self, lost: JobLost, job_id: int, reserves: int | None) -> bool:
        """Whether an acknowledgement that found its lease gone when made again after a
        lost connection had ended the job itself at its first attempt (:func:`done_under`)."""
        return lost.cut_off and reserves is not None and bool(
            done_under(self.dispatch, self.store, [(job_id, reserves)]))

    def progress(self, job_id: int, lease: int | None, value: str,
                 message: str | None) -> None:
        """Store a reserved job's progress (``value`` as JSON text)."""
        self.dispatch.run(PROGRESS, self.store.control.set_progress, job_id, lease, value, message)

    # -- durable steps (sqlq/steps.py), under the job's lease -----------------------------------

    def record_step(self, job_id: int, lease: int, kind: int, name: str, value: str,
                    most: int) -> tuple[str, int]:
        """Record a step's value once (or save a cursor's); (the value kept, when, ms)."""
        kept: tuple[str, int] = self.dispatch.run(RECORD_STEP, self.store.steps.record, job_id,
                                                  lease, kind, name, value, most)
        return kept

    def run_step(self, job_id: int, lease: int, name: str, work: Callable[[], str],
                 most: int) -> tuple[str, int, bool]:
        """A step's work and its record in one transaction (``StepStore.run_step``)."""
        ran: tuple[str, int, bool] = self.dispatch.run(RUN_STEP, self.store.steps.run_step,
                                                       job_id, lease, name, work, most)
        return ran

    def snooze(self, job_id: int, lease: int, delay_ms: int) -> None:
        """Give a reserved job back, due in ``delay_ms``, its claim not counted."""
        self.dispatch.run(SNOOZE, self.store.steps.snooze, job_id, lease, delay_ms)

    # -- an operator's -----------------------------------------------------------------------

    def cancel(self, job_id: int, keep_ms: int, by: str | None = None) -> str:
        """Delete a live job at once; a reserved one's lease remembered ``keep_ms``;
        ``by``: who asked, kept in its record."""
        tube: str = self.dispatch.run(CANCEL, self.store.control.cancel, job_id, keep_ms, by)
        return tube

    def kick(self, tube: str, bound: int) -> int:
        """Up to ``bound`` buried (else delayed) jobs of ``tube`` made ready; how many."""
        kicked: int = self.dispatch.run(KICK, self.store.jobs.kick, tube, bound)
        return kicked

    def kick_job(self, job_id: int) -> None:
        """One buried or delayed job made ready."""
        self.dispatch.run(KICK_JOB, self.store.jobs.kick_job, job_id)

    def postpone(self, job_id: int, delay_ms: int) -> None:
        """A ready or delayed job made to wait ``delay_ms`` from now (0: ready now)."""
        self.dispatch.run(POSTPONE, self.store.jobs.postpone, job_id, delay_ms)

    def give_back(self, owner: str) -> int:
        """Every reservation ``owner`` holds made ready again (a Queue closing)."""
        released: int = self.dispatch.run(GIVE_BACK, self.store.claims.release_owner, owner)
        return released


def done_under(dispatch: Dispatcher, store: Store[Any], reservations: Sequence[tuple[int, int]]
               ) -> set[int]:
    """The lost-connection rule's last word on a delete: made once more after a cut, it
    found these jobs gone, (id, the handle's reserves); which of them its first attempt
    deleted, as their finished records say (``FinishedStore.done_under``). A record
    pruned meanwhile says nothing: that job stays in doubt (``JobLost.cut_off``)."""
    if not reservations:
        return set()
    owner = dispatch.backend.current_owner()  # whose reservations they were
    return set(dispatch.run(DONE_UNDER, store.finished.done_under, reservations, owner))
