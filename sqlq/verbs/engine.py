"""The reservation engine: claiming, looking, due times, reaping the dead and waiting.

Every face of sqlq reserves through this one object: :class:`~sqlq.Queue`'s
``reserve``/``reserve_many``, :class:`~sqlq.AsyncQueue` (its dispatcher calls
:meth:`Engine.look` and :meth:`Engine.due`), both workers and the beanstalkd
server (through the Queue's verbs and :meth:`Engine.look`). A new way to reserve
(limits, dependencies) is decided here once, and in each backend's
``queries.sql``; the faces only check arguments and shape results.

Its names have no underscore because other sqlq modules call them; they are not
part of the public API (``docs/spec.md``): applications use the Queue.

What it decides, beyond the SQL:

* **how a claim runs**: one statement outside a transaction where the backend
  can (``Store.CLAIM_OUTSIDE_TRANSACTION``), one commit for "delete this job and
  claim the next" (the worker's fast path);
* **how a waiting claim looks**: on SQLite a read without the write lock first
  (``Store.LOOK_BEFORE_CLAIM``), so idle waiters woken by unrelated commits never
  contend with producers; dead holders reaped when a death is signalled;
* **when dead holders are looked for** on a backend that cannot signal a death
  (PostgreSQL): by a claim that finds nothing, a waiter's poll, and at most every
  :data:`REAP_EVERY_S` by the claims themselves, so a dead holder's jobs come back
  (in priority order) while the tube has other ready jobs too;
* **when to look again without a commit** (:meth:`Engine.due`): a delayed job
  coming due, a TTR or a pause running out, a backend's liveness poll;
* **waiting** (:meth:`Engine.wait`): one notifier per thread, held only while a
  thread waits, on the policy of ``waiting.py``.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar, cast

from ..backends import Events, Notifier
from ..core.durations import seconds_to_ms
from ..errors import Disconnected, JobLost
from ..model import Job, cap_reason, check_tubes
from ..steps import lease_of
from .contract import done_under
from .dispatch import (
    CUT_OFF,
    FREES,
    READ,
    READIES,
    RECEIVE,
    SETTLE,
    SHARED,
    WRITE,
    CutOff,
    Dispatcher,
    Verb,
)
from .waiting import wait_for

if TYPE_CHECKING:
    from ..attempts import Attempt

T = TypeVar("T")
#: How long (s) a process trusts "none of these tubes has limits" before it reads again:
#: the plain claim skips a limited tube, so a list wrongly thought unlimited starves the
#: tube another process limited, for as long as its other tubes give jobs.
LIMITS_STALE = 1.0
#: On a backend that cannot signal a death (``Backend.liveness_poll``), how often (s) a
#: process's claims look for dead holders even while they find jobs: a reserve that
#: finds nothing and a waiter's poll look anyway, but a busy tube never runs dry, and a
#: dead holder's jobs (the most urgent, perhaps) would wait for their TTR. One clock
#: comparison a claim.
REAP_EVERY_S = 1.0
_monotonic = time.monotonic
_NEVER = float("inf")
#: A checked list of tubes in the backend's own form (``Store.tubes_param``).
TubesParam = Any

# The engine's verbs (verbs/dispatch.py). Its own looks (is anything ready, when is
# something due, who holds jobs, which tubes have limits) are reads without a span: a
# waiter makes them on every wake.
RESERVE_JOB = Verb("reserve_job", RECEIVE, WRITE, durable=False)
RESERVE_LIMITED = Verb("reserve", RECEIVE, WRITE, durable=False)
#: A batch's acknowledgement, and the claim after it, in one durable commit.
SETTLE_AND_RESERVE_LIMITED = Verb("reserve", RECEIVE, WRITE, wakes=FREES)
#: One statement where the store's delete is (``JobStore.ONE_STATEMENT_DELETE``: the
#: engine's own record says).
DELETE_MANY = Verb("delete_many", SETTLE, SHARED, single=True, ack=True, lost=True,
                   wakes=FREES)
#: A failed run's end: released to run again (a lost commit: the job comes back anyway),
#: or buried (durable), with the attempt kept.
RETRY = Verb("retry", SETTLE, WRITE, durable=False, ack=True, wakes=READIES)
BURY_FAILED = Verb("bury", SETTLE, SHARED, ack=True, wakes=FREES)
KEEP_ATTEMPT = Verb("keep_attempt", None, WRITE, durable=False, timed=False)
HAS_READY = Verb("has_ready", None, READ, single=True, span=False)
NEXT_DUE = Verb("next_due", None, READ, span=False, timed=False)  # since the look
HOLDERS = Verb("holders", None, READ, span=False)
LIMITED_TUBES = Verb("limited_tubes", None, READ, single=True, timed=False, span=False)
#: The engine's records (its plain claims' are made per backend, from the store's flags:
#: ``Engine._reserve``, ``Engine._settle_and_reserve``, both named "reserve").
CLAIMS = (RESERVE_JOB, RESERVE_LIMITED, SETTLE_AND_RESERVE_LIMITED, DELETE_MANY, RETRY,
          BURY_FAILED, KEEP_ATTEMPT, HAS_READY, NEXT_DUE, HOLDERS, LIMITED_TUBES)


class _PerThread(threading.local):
    """A thread's own notifier, and whether its last wait left the watch up (wait).
    Class defaults, so that every reserve reads them without getattr's miss (0.3 us)."""

    notifier: Notifier | None = None
    lingering: bool = False


class Engine:
    """Reservations on one backend, for one Queue (and everything built on it).

    Args:
        dispatch: the Queue's dispatcher (its backend and clock).
        make_job: makes a reserved Job of a claim's row (the Queue's Job handle).
    """

    def __init__(self, dispatch: Dispatcher, make_job: Callable[[Any], Job]) -> None:
        self.dispatch = dispatch
        self.backend = backend = dispatch.backend
        self.store = store = backend.store
        self.clock = dispatch.clock
        self._make_job = make_job
        # Whether a claim is one statement depends on the backend (Store's flags).
        self._reserve = RESERVE_LIMITED._replace(
            single=store.claims.CLAIM_OUTSIDE_TRANSACTION)
        #: The worker's fast path: a delete and the next claim in one durable commit.
        self._settle_and_reserve = SETTLE_AND_RESERVE_LIMITED._replace(
            single=store.claims.ONE_STATEMENT_CLAIM)
        self._delete_many = DELETE_MANY._replace(single=store.jobs.ONE_STATEMENT_DELETE)
        # One notifier per thread: threads waiting on a shared Queue must not
        # consume each other's events.
        self._notifiers = _PerThread()
        self._all_notifiers: list[Notifier] = []
        self._tubes_cache: dict[object, TubesParam] = {}
        #: Whether, at the last look, other processes held reservations (see due).
        self._others_hold = False
        #: Per list of watched tubes: whether one has limits (sqlq/core/limits.py), so its
        #: claims go through Store.claim_limited. Learned on first use, again whenever a
        #: plain claim finds nothing (a limit another process set: the plain claims skip
        #: a limited tube, so a list wrongly thought unlimited only finds less), from
        #: each limited claim's own read, and once "no limits" is LIMITS_STALE old (a
        #: list whose other tubes keep giving jobs would never find nothing).
        self._limited: dict[object, bool] = {}
        #: Per list that is one grouped tube without limits at the last limited claim:
        #: that tube, claimed by _claim_fair (whose statement checks the tube's row).
        self._fair_alone: dict[object, str] = {}
        #: Per list known to have no limits: until when (monotonic s) the plain claim
        #: may be made without reading again (absent: read first).
        self._plain_until: dict[object, float] = {}
        self._stamps: dict[object, object] = {}
        #: When (monotonic s) a claim looks for dead holders next (REAP_EVERY_S); never
        #: where the backend signals deaths itself.
        self._reap_at = 0.0 if backend.liveness_poll is not None else _NEVER

    def close(self) -> None:
        """Close every thread's notifier (the Queue is closing)."""
        for notifier in self._all_notifiers:
            notifier.close()

    # -- arguments ---------------------------------------------------------------------------

    def tubes(self, tubes: str | Sequence[str] | None) -> TubesParam:
        """The backend's :tubes parameter for a reserve, checked once per distinct
        argument (a worker asks for the same tubes on every call)."""
        try:
            key = tubes if tubes is None or tubes.__class__ is str else tuple(tubes)
            found = self._tubes_cache.get(key)
        except TypeError:  # not iterable, or unhashable items: check_tubes says what is wrong
            return self.store.claims.tubes_param(check_tubes(tubes))
        if found is None:
            found = self.store.claims.tubes_param(check_tubes(tubes))
            if len(self._tubes_cache) < 256:
                self._tubes_cache[key] = found
        return found

    @staticmethod
    def reserved_jobs(jobs: Iterable[Job], name: str) -> list[Job]:
        """The Jobs of a batch argument, each checked to carry a lease."""
        if isinstance(jobs, (Job, bytes, str)):
            raise TypeError(f"{name} must be an iterable of reserved Jobs, not one "
                            f"{type(jobs).__name__}")
        try:
            items = list(jobs)
        except TypeError:
            raise TypeError(f"{name} must be an iterable of reserved Jobs, not "
                            f"{type(jobs).__name__}") from None
        for job in items:
            # The common case in one test per job: a Job (not a subclass) with a lease.
            if job.__class__ is Job and job.lease is not None:
                continue
            if not isinstance(job, Job):
                raise TypeError(f"{name} must hold reserved Jobs, not {type(job).__name__}")
            lease_of(job)
        return items

    # -- claiming ----------------------------------------------------------------------------

    def _claim(self, tubes: TubesParam, owner: str | None, delete: Job | None = None
               ) -> Job | None:
        """One commit: delete ``delete`` (a reserved Job) if given, and claim the most
        urgent ready job of ``tubes`` for ``owner`` (None: detached); None if none."""
        # Tubes known lately to be without limits go straight on (a dict probe and a
        # clock read: no database read).
        key = tubes if tubes.__class__ is str else tuple(tubes)
        now_s = _monotonic()
        if now_s >= self._reap_at:
            self._reap()
        if self._plain_until.get(key, 0.0) <= now_s and self._limited_now(tubes, key):
            tube = self._fair_alone.get(key)
            if tube is not None:  # a grouped tube without limits: its claim alone
                job = self._claim_fair(tubes, tube, owner, delete)
                if job is not None:
                    return job
                delete = None  # deleted; claim_limited reads the tube's row again
            return _first(self._claim_limited(tubes, owner, 1, [] if delete is None else [delete]))
        if delete is None:
            row = self.dispatch.run(self._reserve, self.store.claims.claim, tubes, owner)
        else:
            row = self.dispatch.run(self._settle_and_reserve, self.store.claims.delete_and_claim,
                                    delete.id, lease_of(delete), tubes, owner)
            delete.state = "deleted"
        if row is None:
            # The plain claim skips limited tubes: one limited since we learnt may hold jobs.
            return _first(self._claim_limited(tubes, owner, 1, [])) \
                if self._limits_changed(tubes) else None
        return self._make_job(row)

    def _claim_many(self, tubes: TubesParam, owner: str | None, n: int,
                    done: list[Job]) -> list[Job]:
        """One commit: delete ``done`` (if any; JobLost names the lost ones, and then
        nothing is claimed) and claim up to n jobs."""
        key = tubes if tubes.__class__ is str else tuple(tubes)
        now_s = _monotonic()
        if now_s >= self._reap_at:
            self._reap()
        if self._plain_until.get(key, 0.0) <= now_s and self._limited_now(tubes, key):
            return self._claim_limited(tubes, owner, n, done)
        if not done:
            rows = self.dispatch.run(self._reserve, self.store.claims.claim_many, tubes, owner, n)
        else:
            lost, rows = self.dispatch.run(self._settle_and_reserve,
                                           self.store.claims.delete_and_claim_many, _leases(done),
                                           tubes, owner, n)
            _deleted(done, lost, claimed=True)
        if not rows and self._limits_changed(tubes):
            return self._claim_limited(tubes, owner, n, [])
        return [self._make_job(row) for row in rows]

    # -- limits (sqlq/core/limits.py) -------------------------------------------------------------

    def _limited_now(self, tubes: TubesParam, key: object) -> bool:
        """Whether claims on ``tubes`` (``key``: their dict key) go through claim_limited,
        once the plain claim's trust ran out: yes if a tube had limits at the last look
        (claim_limited reads them again itself), else read and remember (never learnt,
        or "no limits" is LIMITS_STALE old)."""
        return self._limited.get(key) is True or self._learn_limits(tubes)

    def _limits_changed(self, tubes: TubesParam) -> bool:
        """After a plain claim found nothing: whether a tube of ``tubes`` has limits now,
        read again unless the store proves nothing was committed elsewhere since the last
        read (``Store.limits_stamp``; our own limit changes clear what we remember)."""
        told = self.store.limits.empty_claim_limited()
        if told is not None:  # the claim said so itself (PostgreSQL's claim_job)
            self._remember_limits(tubes, told)
            return told
        stamp = self.store.limits.limits_stamp()
        key = tubes if tubes.__class__ is str else tuple(tubes)
        if stamp is not None and self._stamps.get(key) == stamp and key in self._limited:
            return self._limited[key]
        return self._learn_limits(tubes, stamp)

    def _learn_limits(self, tubes: TubesParam, stamp: object = None) -> bool:
        """Read (no write lock) whether a tube of ``tubes`` has limits, and remember it
        (with the store's stamp taken before the read, if any)."""
        limited = bool(self.dispatch.run(LIMITED_TUBES, self.store.limits.limited_tubes, tubes))
        self._remember_limits(tubes, limited)
        if stamp is not None:
            self._stamps[tubes if tubes.__class__ is str else tuple(tubes)] = stamp
        return limited

    def _remember_limits(self, tubes: TubesParam, limited: bool) -> None:
        if len(self._limited) >= 256:
            self.forget_limits()
        key = tubes if tubes.__class__ is str else tuple(tubes)
        self._limited[key] = limited
        if limited:
            self._plain_until.pop(key, None)
        else:
            self._plain_until[key] = _monotonic() + LIMITS_STALE

    def known_limited(self, tubes: TubesParam) -> bool:
        """Whether a tube of ``tubes`` had limits at this engine's last look (no read): a
        reserve waiting on them that a cap holds back learnt it in its own claim (the
        server's waiters: who wakes for a slot its own connections free)."""
        return self._limited.get(tubes if tubes.__class__ is str else tuple(tubes)) is True

    def forget_limits(self) -> None:
        """This process changed a limit: learn every list of tubes again."""
        self._limited.clear()
        self._plain_until.clear()
        self._stamps.clear()
        self._fair_alone.clear()

    def _claim_limited(self, tubes: TubesParam, owner: str | None, n: int,
                       done: list[Job]) -> list[Job]:
        """One write transaction: delete ``done`` (as claim and claim_many do: a lost lease
        claims nothing) and claim up to n jobs within the tubes' limits."""
        verb = SETTLE_AND_RESERVE_LIMITED if done else RESERVE_LIMITED
        lost, rows, limited = self.dispatch.run(verb, self.store.settle_and_claim_limited,
                                                _leases(done), tubes, owner, n)
        self._remember_limits(tubes, limited)
        alone = self.store.limits.fair_alone()
        key = tubes if tubes.__class__ is str else tuple(tubes)
        if alone is None:
            self._fair_alone.pop(key, None)
        elif len(self._fair_alone) < 256:
            self._fair_alone[key] = alone
        if done:
            _deleted(done, lost, claimed=True)
        return [self._make_job(row) for row in rows]

    def _claim_fair(self, tubes: TubesParam, tube: str, owner: str | None,
                    delete: Job | None) -> Job | None:
        """One commit: delete ``delete`` if given, and claim the next job of the grouped
        ``tube`` watched alone, last seen without limits (groups.py); None if it has none
        now, or has limits or a pause (the caller then claims through claim_limited)."""
        verb = SETTLE_AND_RESERVE_LIMITED if delete is not None else RESERVE_LIMITED
        row = self.dispatch.run(verb, self.store.settle_and_claim_fair,
                                [] if delete is None else _leases([delete]), tubes, tube, owner)
        if delete is not None:
            delete.state = "deleted"
        return None if row is None else self._make_job(row)

    def claim_by_id(self, job_id: int, owner: str | None) -> Job:
        """Reserve one job by id, whatever its state unless reserved (JobNotFound)."""
        return self._make_job(self.dispatch.run(RESERVE_JOB, self.store.claims.claim_by_id, job_id,
                                                owner))

    def claim_first(self, tubes: TubesParam, delete: Job | None, detach: bool,
                    timeout: float | None) -> Job | None:
        """A reserve's claim before it waits (deleting ``delete`` in the same commit),
        then, if it found nothing and dead holders' jobs came back, once more. None when a
        lost connection is to be waited through (:func:`_waited_through`)."""
        try:
            owner = None if detach else self.backend.owner_token()
            found = self._claim(tubes, owner, delete)
            if found is None and self._reap():
                found = self._claim(tubes, owner)
            return found
        except Disconnected:
            _waited_through(delete is not None, timeout)
            return None

    def claim_first_many(self, tubes: TubesParam, n: int, done: list[Job],
                         timeout: float | None) -> list[Job]:
        """:meth:`claim_first` for a reserve_many: up to n jobs (deleting ``done``)."""
        try:
            owner = self.backend.owner_token()
            found = self._claim_many(tubes, owner, n, done)
            if not found and self._reap():
                found = self._claim_many(tubes, owner, n, [])
            return found
        except Disconnected:
            _waited_through(bool(done), timeout)
            return []

    def delete_many(self, done: list[Job]) -> None:
        """Delete reserved jobs in one commit: those whose lease holds always; then
        JobLost names the others (see Queue.delete_many)."""
        lost = self.dispatch.run(self._delete_many, self.store.claims.delete_many, _leases(done))
        if isinstance(lost, CutOff):  # those its first attempt deleted are done
            gone = set(lost)
            first = done_under(self.dispatch, self.store, [
                (job.id, job.reserves) for job in done if (job.id, job.lease) in gone])
            lost = CutOff(pair for pair in lost if pair[0] not in first)
        _deleted(done, lost, claimed=False)

    def end_attempt(self, job: Job, attempt: Attempt, delay: float | None) -> None:
        """A worker's end of a failed run of the reserved ``job``: release it to run
        again after ``delay`` seconds (None: bury it, the reason ``attempt.message``) and
        keep ``attempt``, in one commit. JobLost, as release and bury."""
        from ..attempts import KEPT, traced  # a worker's: not loaded with the Queue

        delay_ms = None if delay is None else seconds_to_ms(delay, "delay")
        self.dispatch.run(BURY_FAILED if delay_ms is None else RETRY, self.store.end_attempt,
                          job.id, lease_of(job), traced(attempt).params(), KEPT, delay_ms,
                          attempt.message)
        if delay_ms is None:
            job.state, job.bury_reason = "buried", cap_reason(attempt.message)
        else:
            job.state = "delayed" if delay_ms else "ready"

    def keep_attempt(self, attempt: Attempt) -> None:
        """Keep a failed run whose reservation was lost meanwhile (nothing if the job is
        gone, or was never released, buried or reserved again)."""
        from ..attempts import KEPT, traced

        self.dispatch.run(KEEP_ATTEMPT, self.store.history.keep_attempt,
                          traced(attempt).params(), KEPT)

    # -- looking, for a waiting claim ----------------------------------------------------------

    def look(self, tubes: TubesParam, owner: str | None, events: Events, *,
             sure: bool = False) -> Job | None:
        """One look of a waiting reserve (the blocking wait's, an AsyncQueue's, the
        server's): claim if something may be ready, as :meth:`_look_with` decides
        (``sure``: the caller just made a job ready, claim without reading first). A
        token (not None: detached) is fetched again, as the backend may have had to
        confirm it anew."""
        if owner is not None:
            owner = self.backend.owner_token()
        return self._look_with(tubes, events, lambda: self._claim(tubes, owner), sure=sure)

    def look_many(self, tubes: TubesParam, n: int, events: Events) -> list[Job] | None:
        """One look of a waiting reserve_many: :meth:`look`'s, for up to n jobs."""
        owner = self.backend.owner_token()  # confirmed again (a session may have been lost)
        return self._look_with(tubes, events,
                               lambda: self._claim_many(tubes, owner, n, []) or None)

    def _look_with(self, tubes: TubesParam, events: Events, claim: Callable[[], T | None],
                   *, sure: bool = False) -> T | None:
        """A waiting claim's look: reap dead holders when told to, then ``claim()`` if a
        read without the write lock says a job is ready (or at once, on a backend whose
        empty claim locks nothing: ``Store.LOOK_BEFORE_CLAIM``)."""
        # A backend that cannot signal a death is asked on the wakes of its poll
        # timer (no commit event), not on every commit.
        polled = self.backend.liveness_poll is not None and not events.commit
        if (events.owner or polled) and self._reap():
            found = claim()
            if found is not None:
                return found
        if sure or not self.store.claims.LOOK_BEFORE_CLAIM:
            return claim()
        return claim() if self._has_ready(tubes) else None

    def _has_ready(self, tubes: TubesParam) -> bool:
        """Whether a claim on ``tubes`` would find a job now; a read, no write lock."""
        return bool(self.dispatch.run(HAS_READY, self.store.claims.has_ready_job, tubes))

    def due(self, tubes: TubesParam, since: int | None = None) -> int | None:
        """When (ms) something may make a job ready in ``tubes`` without a commit: the
        next due time after ``since`` (the clock when the look this follows began; now
        by default), or sooner a backend's liveness poll while others hold jobs.

        Counted from the look, not from now: a time that came between the two (a rate's
        next claim, a delayed job) held that look back, and the read after it would no
        longer count it: the waiter would sleep past it, to its deadline (a rate test
        in CI saw four claimers stall 8 s so). Such a time is due at once: one more look.
        """
        poll = self.backend.liveness_poll
        due_ms: int | None = self.dispatch.run(
            NEXT_DUE, self.store.claims.next_due, self.clock() if since is None else since,
            tubes)
        if poll is not None and self._others_hold:
            # A backend that cannot signal a holder's death is asked again soon.
            check_ms = self.clock() + int(poll * 1000)
            due_ms = check_ms if due_ms is None else min(due_ms, check_ms)
        return due_ms

    def _reap(self) -> bool:
        """Give back the reservations of processes that died; True if any came back.
        The next claim's look (REAP_EVERY_S) is counted from here."""
        backend, store = self.backend, self.store
        if self._reap_at != _NEVER:
            self._reap_at = _monotonic() + REAP_EVERY_S
        me = backend.current_owner() or ""
        held = self.dispatch.run(HOLDERS, store.claims.reserving_owners, me)
        self._others_hold = bool(held)
        return bool(held) and backend.reap_owners(held) > 0

    # -- waiting -----------------------------------------------------------------------------

    def wait(self, look: Callable[[Events], T | None], deadline: float | None,
             due: Callable[[int], int | None] | None = None, *, linger: bool = False
             ) -> T | None:
        """Block this thread until ``look`` finds something or the deadline passes (the
        loop and its policy: waiting.py).

        A watch may cost every commit something, so it is held only while waiting;
        but taking it down (and up again) costs two system calls each way, which a
        worker woken by a job would pay before it returns that job. With ``linger``
        a wait that found something leaves it up: the thread's next reserve either
        waits again (on the watch already there) or finds a job at once and takes
        it down then (:meth:`stop_lingering`), off the path of a wakeup.
        """
        notifier = self._thread_notifier()
        notifier.resume()  # a watch may cost every commit something: only while waiting
        found: T | None = None
        try:
            found = wait_for(notifier, look, deadline, self.clock, due)
            return found
        finally:
            if linger and found is not None:
                self._notifiers.lingering = True
            else:
                self._notifiers.lingering = False
                notifier.pause()

    def stop_lingering(self) -> None:
        """This thread goes on without waiting: take down a watch its last wait left up."""
        mine = self._notifiers
        if mine.lingering and mine.notifier is not None:
            mine.lingering = False
            mine.notifier.pause()

    def _thread_notifier(self) -> Notifier:
        """This thread's notifier (opened on first use), watching or not as it is."""
        notifier = self._notifiers.notifier
        if notifier is None:
            notifier = self.backend.open_notifier()
            self._notifiers.notifier = notifier
            self._all_notifiers.append(notifier)
        return notifier


def _waited_through(acking: bool, timeout: float | None) -> None:
    """The lost-connection rule of a reserve's first claim, called in its ``except
    Disconnected``: re-raised when acknowledgements were in flight (whether they
    committed is for the caller to find out) or the reserve must not wait; else the
    wait's looks go on through the outage (waiting.py)."""
    if acking or timeout == 0:
        raise  # noqa: PLE0704 - the Disconnected being handled by the caller


def _first(jobs: list[Job]) -> Job | None:
    return jobs[0] if jobs else None


def _leases(done: list[Job]) -> list[tuple[int, int]]:
    """The (id, lease) pairs of jobs :meth:`Engine.reserved_jobs` checked."""
    return cast("list[tuple[int, int]]", [(job.id, job.lease) for job in done])


def _deleted(done: list[Job], lost: list[tuple[int, int]], claimed: bool) -> None:
    """Mark a batch's deleted handles; raise JobLost for the lost ones (committed)."""
    stale = set(lost)
    kept = 0
    for job in done:
        if not stale or (job.id, job.lease) not in stale:
            job.state = "deleted"
            kept += 1
    if lost:
        ids = list(dict.fromkeys(job_id for job_id, _ in lost))
        named = ", ".join(str(i) for i in ids)
        tail = "; nothing was claimed" if claimed else ""
        cut_off = isinstance(lost, CutOff)
        raise JobLost(f"job {named}: lease lost (TTR expired or reserved again)"
                      f"{CUT_OFF if cut_off else ''}; the other {kept} deleted{tail}",
                      job_ids=ids, cut_off=cut_off)
