"""Reserves: those arriving together, and the FIFO of waiting connections.

Reserves from several connections in one loop round are claimed together at its
end, in one statement (``flush``: ``Queue.reserve_many``), the jobs handed out
in arrival order, as claims one after another would hand them out: with eight
workers, a claim per round instead of one per worker.

A reserve that finds nothing parks its connection here. The waiters are served
again, first come first served, when a job may have become ready: a put,
release, kick or pause through this server (``poke``), a delete or bury of a
job whose tube a waiter watches with limits (``freed``: a cap's slot is free),
a commit by another process (a notifier's fd becomes readable), or a timer (a
delayed job coming due, a TTR or a pause running out, a rate's next claim, a
reserve's own timeout, the DEADLINE_SOON margin, a re-check of a commit event
that found nothing). One timer covers all of those (``arm``).

The waiting policy is the library's: each pass looks through the reservation
engine (``Engine.look``: a read before the claim, reaping when a death is
signalled), its due times are ``Engine.due``'s, and re-checks after a commit
event follow ``waiting.Pacer``, as a blocked ``Queue.reserve`` and an
AsyncQueue's dispatcher do. What is the server's own is the loop around them:
one selector, many connections, DEADLINE_SOON and the write lock (locks.py).
"""

from __future__ import annotations

import selectors
import time

from sqlq.errors import Locked
from sqlq.server.loop import log, now_ms
from sqlq.server.protocol import SAFETY_MARGIN_MS, Reply

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Protocol

    from sqlq.backends import Events, Notifier
    from sqlq.model import Job
    from sqlq.queue import Queue
    from sqlq.server.batch import Batch
    from sqlq.server.connection import Conn, Held
    from sqlq.server.locks import LockWaits
    from sqlq.server.loop import Loop, Timer
    from sqlq.verbs.waiting import Pacer

    class Server(Protocol):
        """What the waiters ask of their server (``core.Server``)."""

        @property
        def q(self) -> Queue: ...

        @property
        def loop(self) -> Loop: ...

        @property
        def batch(self) -> Batch: ...

        @property
        def locks(self) -> LockWaits: ...

        @property
        def stats(self) -> _Stats: ...

        @property
        def skew(self) -> float: ...

    class _Stats(Protocol):  # stats.Stats: the counter a reservation's timeout adds to
        job_timeouts: int

FALLBACK_RECHECK = 5.0
"""Waiters look again at least this often, whatever the notifier says."""
MIN_NOTIFY_GAP = 0.001
"""Other processes' commits wake the waiters at most this often (a busy file stays cheap)."""
NOTIFIER_LINGER = 1.0
"""The notifier is closed once nobody has waited for about this long.

While it is open, every write to the file (this server's own puts and deletes
included) queues inotify events in the kernel: about 10 µs a put. A worker that
waits again soon after keeps it; one that never waits never opens it."""


class Wait:
    """A reserve waiting for a job."""

    __slots__ = ("tubes", "deadline")

    def __init__(self, tubes: tuple[str, ...], deadline: float | None) -> None:
        self.tubes = tubes
        self.deadline = deadline  # time.monotonic() of TIMED_OUT, None: wait for ever


#: What Waiters.after does for a verb: poke, or poke if a capped tube's waiter is held back.
_ALWAYS, _IF_CAPPED = object(), object()


def _pokes_by_verb() -> dict[str, object]:
    """Waiters.after's answer per verb, from what its record says its commit gives
    waiters (``verbs.WAKES``), made once: ``after`` runs on every command. Imported here,
    at the first command, not at the top: the server imports nothing of the library's
    before it listens, and a command runs only once the queue is attached."""
    from sqlq.verbs import FREES, READIES, WAKES

    return {verb: _ALWAYS if wakes & READIES else _IF_CAPPED if wakes & FREES else None
            for verb, wakes in WAKES.items()}


class Waiters:
    """The connections blocked in a reserve, in arrival order, and the timer that serves them."""

    def __init__(self, server: Server) -> None:
        self.server = server
        self.waiting: dict[Conn, Wait] = {}  # in arrival order: the first waiter is served first
        self._timer: Timer | None = None
        self._notifier: Notifier | None = None  # open while reserves wait
        self._notify_fd: int | None = None  # its fd (None: none, or a polling notifier)
        self._unwatch_timer: Timer | None = None
        self._listening = False  # the fd is in the selector (only while someone waits)
        self._dirty = False      # a job may have become ready since the last pass
        self._poked = False      # ... because of a command on this server
        # What the notifier said since the last pass (sqlq.backends.Events' two flags:
        # the server imports nothing of the library's before it listens).
        self._heard_commit = self._heard_owner = False
        self._pacer: Pacer | None = None  # the re-checks of commit events (with the notifier)
        # Tubes watched by waiters whose watch lists have limits (set by arm): a job of one
        # of them that this server's connections delete or bury frees a slot (after).
        self._capped_watch: frozenset[str] = frozenset()
        #: What ``after`` does for each verb (_pokes_by_verb), made at the first command.
        self._pokes: dict[str, object] | None = None
        self._recheck_at: float | None = None  # the pacer's next look (monotonic)
        self._last_pass = 0.0
        self._looked_ms: int | None = None  # when the last pass's looks began (Engine.due)
        # reserves of this round claimed together at its end (flush), in arrival order
        self.deferred: dict[Conn, int | None] = {}
        self.claimed_together = 0  # jobs handed out by flush's shared claims

    def __len__(self) -> int:
        return len(self.waiting)

    def __contains__(self, conn: Conn) -> bool:
        return conn in self.waiting

    def forget(self, conn: Conn) -> None:
        """A closed connection waits no more."""
        self.waiting.pop(conn, None)
        self.deferred.pop(conn, None)

    # -- reserving --

    def reserve(self, conn: Conn, timeout: int | None) -> None:
        """``reserve`` (timeout None) or ``reserve-with-timeout``: answer now, park ``conn``,
        or, when other connections' commands came in the same round, claim with the
        round's other reserves at its end (``flush``).

        Only the last command of its connection's input is deferred: one pipelined
        before others runs in the round's transaction, as every other command (a
        round of one connection is one commit). Nor is one of a connection holding
        a job: it may be owed DEADLINE_SOON first.
        """
        conn.worker = True
        if not (conn.reserved or conn.eof or conn.inbuf) and (
                self.deferred or not self.server.batch.alone(conn)):
            conn.waiting = True  # reads no further command until answered
            self.deferred[conn] = timeout
            return
        self._reserve_now(conn, timeout)

    def flush(self) -> None:
        """Claim the round's deferred reserves: one statement for each run of reserves
        with the same watch list, the jobs handed out in arrival order (the first to
        ask gets the most urgent), as one claim after another would have."""
        while self.deferred:
            asked = [(c, t) for c, t in self.deferred.items() if c.waiting and not c.closed]
            self.deferred.clear()
            start = 0
            while start < len(asked):
                end = start + 1
                while end < len(asked) and asked[end][0].watch == asked[start][0].watch:
                    end += 1
                self._claim_together(asked[start:end])
                start = end

    def _claim_together(self, asked: list[tuple[Conn, int | None]]) -> None:
        """Claim up to one job for each of ``asked`` (same watch list) in one statement;
        those left without one go the one-at-a-time way (reap, TIMED_OUT or wait)."""
        jobs: list[Job] = []
        if len(asked) > 1 and not self.server.locks.locked():
            q, names = self.server.q, list(asked[0][0].watch)
            try:
                jobs = self.server.batch.run(
                    lambda: q.reserve_many(len(asked), names, timeout=0),
                    durable=False, conn=None)
                self.claimed_together += len(jobs)
            except Locked:
                self.server.locks.refused()
            except Exception:
                log().exception("reserve failed")
        for n, (conn, timeout) in enumerate(asked):
            if n < len(jobs):
                self.answer(conn, conn.hold(jobs[n]))
                continue
            conn.waiting = False
            self._reserve_now(conn, timeout)
            if not conn.waiting:  # answered: on with its next commands
                conn.process()
                conn.update()

    def _reserve_now(self, conn: Conn, timeout: int | None) -> None:
        """A reserve claimed on its own: answer now or park ``conn``."""
        deadline = None if timeout is None else time.monotonic() + timeout - self.server.skew
        soon = self.deadline_soon(conn, now_ms())
        reply = self._claim(conn, conn.watch)
        if reply is None and soon:
            reply = Reply.DEADLINE_SOON
        elif reply is None and (timeout == 0 or conn.eof):
            reply = Reply.TIMED_OUT
        elif reply is None and self._watch_file():
            # Watching only from now on: look again, or a commit made since the look slips by.
            from sqlq.backends import Events

            reply = self._claim(conn, conn.watch, Events())
        if reply is not None:
            conn.send(reply)
            return
        conn.waiting = True
        self.waiting[conn] = Wait(tuple(conn.watch), deadline)
        self._listen_file()
        self.arm()

    def _claim(self, conn: Conn, tubes: list[str] | tuple[str, ...],
               events: Events | None = None, sure: bool = False) -> bytes | None:
        """Reserve the best ready job for ``conn``.

        Without ``events``, as ``reserve(timeout=0)`` does: and if nothing is ready,
        first give back the reservations of processes that died, which costs a look
        at each process holding reservations. With ``events`` (a waiting reserve's
        pass), as the engine looks for every waiting reserve (``Engine.look``): a
        read first (no write lock: most wake-ups by other processes' commits find
        nothing, and must not contend with the writers) unless ``sure`` (this server
        just made a job ready), dead holders reaped when the events say one died.
        While another process holds the write lock (locks.py), nothing is claimed:
        the reserve waits on.
        """
        locks = self.server.locks
        if locks.locked():
            return None
        q = self.server.q
        names = list(tubes)
        try:
            if events is None:
                job = self.server.batch.run(lambda: q.reserve(names, timeout=0),
                                            durable=False, conn=conn)
            else:
                engine = q.engine
                param = engine.tubes(names)
                job = self.server.batch.run(
                    lambda: engine.look(param, "", events, sure=sure), durable=False,
                    conn=conn)
        except Locked:
            locks.refused()
            return None
        except Exception:
            log().exception("reserve failed")
            return None
        return None if job is None else conn.hold(job)

    def answer(self, conn: Conn, reply: bytes) -> None:
        """End a waiting reserve with ``reply`` and go on with the client's next commands."""
        self.waiting.pop(conn, None)
        conn.waiting = False
        conn.send(reply)
        conn.process()
        conn.update()

    def deadline_soon(self, conn: Conn, now: int) -> bool:
        """True if a job this connection holds is in the last second of its TTR."""
        if not conn.reserved:  # the usual worker: it holds nothing when it reserves
            return False
        for job_id, held in list(conn.reserved.items()):
            if held.until <= now:  # timed out: the Queue already treats it as ready
                del conn.reserved[job_id]
                self.server.stats.job_timeouts += 1
            elif held.until - SAFETY_MARGIN_MS <= now and not self._still_held(job_id, held):
                del conn.reserved[job_id]  # deleted or released by an administrator meanwhile
        return any(h.until - SAFETY_MARGIN_MS <= now for h in conn.reserved.values())

    def _still_held(self, job_id: int, held: Held) -> bool:
        job = self.server.q.peek(job_id)
        return job is not None and job.state == "reserved" and job.reserved_until == held.until

    # -- when to serve them --

    def poke(self) -> None:
        """Something here may have made a job ready: serve the waiters on the next turn."""
        self._dirty = self._poked = True
        self._serve_soon(0.0)

    def after(self, verb: str, tube: str | None = None) -> None:
        """A connection here ran ``verb`` (on a job of ``tube``): what its commit may give
        the waiters is the verb's record's to say (``verbs.WAKES``). Something to claim:
        a poke. A slot of ``tube``'s concurrency cap freed (a held job deleted or buried):
        the waiters it held back are served on the next turn, as a poke's are, only when a
        waiter watches ``tube`` in a list with limits (a set probe): a tube without them
        costs nothing more, and no waiter is served for nothing. Another process's
        commits wake them through the notifier (a NOTIFY on PostgreSQL: migration 0016)."""
        pokes = self._pokes
        if pokes is None:
            pokes = self._pokes = _pokes_by_verb()
        how = pokes[verb]
        if how is _ALWAYS or (how is _IF_CAPPED and tube in self._capped_watch):
            self.poke()

    def _serve_soon(self, delay: float) -> None:
        """Serve the waiters within ``delay`` seconds (keeping an earlier timer)."""
        if not self.waiting:  # the usual case on a put: nobody to serve, no clock to read
            return
        timer = self._timer
        if timer is None or timer.cancelled or timer.when > time.monotonic() + delay:
            self._set_timer(delay)

    def _watch_file(self) -> bool:
        """Learn of other processes' commits while reserves wait; True if it starts now.

        The caller looks again after a start, so that no commit slips by. Not at
        start-up: inotify costs milliseconds to set up the first time (a drop-in
        beanstalkd must answer quickly), and a server nobody waits on has no use for
        the events, which cost every write (NOTIFIER_LINGER). The server's own
        notifier, not the Queue's: it is closed when nobody waits.
        """
        if self._notifier is not None:
            return False
        from sqlq.verbs.waiting import Pacer

        self._notifier = self.server.q.backend.open_notifier()
        self._notify_fd = self._notifier.fileno()
        self._pacer = Pacer(self._notifier)
        return True

    def _schedule_unwatch(self) -> None:
        """Nobody waits: close the notifier unless someone waits again within the linger."""
        timer = self._unwatch_timer
        if self._notifier is not None and (timer is None or timer.cancelled):
            self._unwatch_timer = self.server.loop.call_later(NOTIFIER_LINGER, self._unwatch)

    def _unwatch(self) -> None:
        if self.waiting or self._notifier is None:
            return  # someone waits again: when nobody does, this is scheduled anew
        if self._listening:
            assert self._notify_fd is not None
            self.server.loop.unregister(self._notify_fd)
            self._listening = False
        self._notifier.close()
        self._notifier = self._notify_fd = self._pacer = self._recheck_at = None

    def close(self) -> None:
        """Close the notifier (the server stops)."""
        if self._unwatch_timer is not None:
            self._unwatch_timer.cancel()
        if self._notifier is not None:
            self._notifier.close()
            self._notifier = self._notify_fd = None

    def _listen_file(self) -> None:
        """Wake on the notifier while someone waits.

        Events queue up in the kernel meanwhile (inotify coalesces repeats, and an
        overflow reads as "anything may have changed"), so a waiter that parks
        after its look still wakes for a commit made after that look.
        """
        if self._notify_fd is not None and not self._listening:
            self._listening = True
            self.server.loop.register(
                self._notify_fd, selectors.EVENT_READ, self._on_notify)

    def _on_notify(self, mask: int) -> None:
        """Another process committed (or one holding reservations died)."""
        assert self._notifier is not None and self._notify_fd is not None
        events = self._notifier.drain()
        if not self.waiting:
            # Nobody waits: stop waking for every commit, this server's own included.
            self.server.loop.unregister(self._notify_fd)
            self._listening = False
            self._schedule_unwatch()
            return
        if not events:
            return
        self._dirty = True
        self._heard_commit = self._heard_commit or events.commit
        self._heard_owner = self._heard_owner or events.owner
        self._serve_soon(max(self._last_pass + MIN_NOTIFY_GAP - time.monotonic(), 0.0))

    def _serve(self) -> None:
        """Hand out jobs to waiters in arrival order; time out those whose time has come."""
        from sqlq.backends import Events

        sure = self._poked  # a command here made a job ready: claim without a read first
        events = Events(self._heard_commit, self._heard_owner)
        self._heard_commit = self._heard_owner = False
        self._dirty = self._poked = False
        now, mono = now_ms(), time.monotonic()
        self._last_pass, self._looked_ms = mono, now
        empty: set[frozenset[str]] = set()
        for conn, wait in list(self.waiting.items()):
            if conn not in self.waiting:
                continue
            key = frozenset(wait.tubes)
            reply = None
            if key not in empty:
                reply = self._claim(conn, wait.tubes, events, sure)
                if reply is None:
                    empty.add(key)
            if reply is None and self.deadline_soon(conn, now):
                reply = Reply.DEADLINE_SOON
            elif reply is None and wait.deadline is not None and mono >= wait.deadline:
                reply = Reply.TIMED_OUT
            if reply is not None:
                self.answer(conn, reply)
        if self._pacer is not None:
            # A commit event that found nothing is looked at again on the notifier's
            # schedule (the commit may not be visible yet), as every waiter does.
            recheck = self._pacer.after_look(events)
            self._recheck_at = None if recheck is None else mono + recheck
        self.arm()

    def arm(self) -> None:
        """Set the one timer to the next moment a waiter may need serving."""
        if not self.waiting:
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None
            self._capped_watch = frozenset()
            self._schedule_unwatch()
            return
        engine = self.server.q.engine
        now, mono = now_ms(), time.monotonic()
        delay = FALLBACK_RECHECK if self._notify_fd is not None else 0.05
        retry_at = self.server.locks.retry_at  # a claim found the lock taken: try again then
        if retry_at > mono:  # (commands parked for the lock poke the waiters once answered)
            delay = min(delay, retry_at - mono)
        if self._recheck_at is not None:
            delay = min(delay, self._recheck_at - mono)
        for key in {frozenset(w.tubes) for w in self.waiting.values()}:
            # a rate's next claim included (a waiter it holds back wakes then), counted from
            # the last pass's looks: what came due since is served at once
            due = engine.due(engine.tubes(sorted(key)), self._looked_ms)
            if due is not None:
                delay = min(delay, (due - now) / 1000)
        # Learnt by the waiter's own claim, under its list in watch order (_claim's).
        self._capped_watch = frozenset(
            tube for watched in {w.tubes for w in self.waiting.values()}
            if engine.known_limited(engine.tubes(list(watched))) for tube in watched)
        for conn, wait in self.waiting.items():
            if wait.deadline is not None:
                delay = min(delay, wait.deadline - mono)
            for held in conn.reserved.values():
                delay = min(delay, (held.until - SAFETY_MARGIN_MS - now) / 1000)
        self._set_timer(0.0 if self._dirty else max(delay, 0.001))

    def _set_timer(self, delay: float) -> None:
        if self._timer is not None:
            self._timer.cancel()
        self._timer = self.server.loop.call_later(delay, self._serve)
