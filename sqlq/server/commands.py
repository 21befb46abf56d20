"""The protocol's verbs: one parsed command line in, a Queue call, one reply out.

Every handler takes the connection and the parsed ``Command`` and returns the
reply bytes; ``reserve`` and ``reserve-with-timeout`` go to the waiters, which
may answer later. A failing database answers INTERNAL_ERROR to that one
command (``_guarded``) and the server goes on.
"""

from __future__ import annotations

from sqlq.errors import JobLost, JobNotFound, JobTooBig, Locked
from sqlq.server import protocol as bs
from sqlq.server.loop import log
from sqlq.server.protocol import Command, ProtocolError, Reply, Verb
from sqlq.server.stats import tubes
from sqlq.server.yaml import yaml_list

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Protocol

    from sqlq.server.connection import Conn, Held
    from sqlq.server.locks import LockWaits
    from sqlq.server.stats import Server as Viewed
    from sqlq.server.stats import Stats

    class Server(Viewed, Protocol):
        """What the commands ask of their server (``core.Server``): what the stats
        documents read of it, and the parts the commands drive."""

        @property
        def stats(self) -> Stats: ...

        @property
        def locks(self) -> LockWaits: ...

        @property
        def skew(self) -> float: ...

# Verbs go by their names (``_value_``) on the hot path: an Enum member hashes, and
# reads ``.value``, through Python code, and reads through its class via the metaclass.
# An id past SQLite's integers names no job: the Queue's by-id verbs say so
# (model.job_id_in_range), and the handlers answer NOT_FOUND.
_PUT, _QUIT, _RESERVE, _RESERVE_WITH_TIMEOUT = (
    Verb.PUT, Verb.QUIT, Verb.RESERVE, Verb.RESERVE_WITH_TIMEOUT)
# The verbs that write: while commands wait for another process's write lock, these
# queue behind them untried (locks.py); the others (reads, in-memory) run at once.
_WRITES = frozenset(v.value for v in (
    Verb.RESERVE_JOB, Verb.DELETE, Verb.RELEASE, Verb.BURY, Verb.TOUCH, Verb.KICK,
    Verb.KICK_JOB, Verb.PAUSE_TUBE))
# The writes whose commit the Queue makes durable (fsync'd in full mode); a claim,
# a release and a touch are not (batch.py commits a round of only those without one).
_DURABLE = frozenset(v.value for v in (
    Verb.PUT, Verb.DELETE, Verb.BURY, Verb.KICK, Verb.KICK_JOB, Verb.PAUSE_TUBE))
# The writes of one statement (batch.py runs them without a savepoint where it may): a
# put. Not a delete: SQLite's writes the job's record, then deletes the job (migration
# 0009), and a failure between the two must take back the record.
_SINGLE = frozenset(v.value for v in (Verb.PUT,))


class Commands:
    """beanstalkd's commands over the server's Queue, for any connection."""

    def __init__(self, server: Server) -> None:
        self.server = server
        self.stats = server.stats
        self.waiters = server.waiters
        self.locks = server.locks
        handlers: dict[Verb, Callable[[Conn, Command], bytes]] = {
            Verb.PEEK: self._peek, Verb.PEEK_READY: self._peek_in_tube,
            Verb.PEEK_DELAYED: self._peek_in_tube, Verb.PEEK_BURIED: self._peek_in_tube,
            Verb.RESERVE_JOB: self._reserve_job, Verb.DELETE: self._delete,
            Verb.RELEASE: self._release, Verb.BURY: self._bury, Verb.TOUCH: self._touch,
            Verb.KICK: self._kick, Verb.KICK_JOB: self._kick_job, Verb.STATS: self._stats,
            Verb.STATS_JOB: self._stats_job, Verb.STATS_TUBE: self._stats_tube,
            Verb.USE: self._use, Verb.WATCH: self._watch, Verb.IGNORE: self._ignore,
            Verb.LIST_TUBES: self._list_tubes, Verb.LIST_TUBE_USED: self._list_tube_used,
            Verb.LIST_TUBES_WATCHED: self._list_tubes_watched, Verb.PAUSE_TUBE: self._pause_tube,
        }
        self._handlers = {verb.value: fn for verb, fn in handlers.items()}

    def dispatch(self, conn: Conn, line: bytes) -> None:
        """Run one command line and send its reply (a reserve may answer later)."""
        try:
            cmd = bs.parse_command(line, self.server.max_job_size)
        except ProtocolError as e:
            if e.verb is not None:
                self.stats.cmds[e.verb.value] += 1
            if e.discard:
                conn.discard, conn.discard_reply = e.discard, e.reply
            else:
                conn.send(e.reply)
            return
        verb = cmd.verb
        name = verb._value_
        self.stats.cmds[name] += 1
        if verb is _PUT:
            conn.producer = True
            conn.expect(cmd)
        elif verb is _RESERVE_WITH_TIMEOUT:
            self.waiters.reserve(conn, cmd.ints[0])
        elif verb is _RESERVE:
            self.waiters.reserve(conn, None)
        elif verb is _QUIT:
            conn.inbuf.clear()
            conn.close_after_flush()
        else:
            handler = self._handlers[name]
            self._answer(conn, name, lambda: handler(conn, cmd), name in _WRITES)

    def _answer(self, conn: Conn, verb: str, attempt: Callable[[], bytes],
                write: bool = True) -> None:
        """Send ``attempt()``'s reply, now or, if it waits for the write lock, later.
        A write joins the round's transaction (batch.py).

        Written flat for the usual case (nobody waits for the lock): ``LockWaits.run``
        around ``_guarded`` around the batch cost three closures and three calls a
        command; a command that must wait is parked with them as before.
        """
        locks = self.locks
        if write:
            if locks.locked():  # queue behind the parked commands, untried
                locks.park(conn, self._parked(conn, verb, attempt))
                return
            try:
                reply = self.server.batch.run(attempt, verb in _DURABLE, conn, verb in _SINGLE)
            except Locked:
                locks.refused()
                locks.park(conn, self._parked(conn, verb, attempt))
                return
            except Exception:
                log().exception("%s failed", verb)
                reply = Reply.INTERNAL_ERROR
        else:
            try:
                reply = attempt()
            except Locked:
                locks.refused()
                locks.park(conn, lambda: self._guarded(verb, attempt))
                return
            except Exception:
                log().exception("%s failed", verb)
                reply = Reply.INTERNAL_ERROR
        conn.send(reply)

    def _parked(self, conn: Conn, verb: str, attempt: Callable[[], bytes]
                ) -> Callable[[], bytes]:
        """A write to run again once the lock may be free (locks.py), in the round's
        transaction as any write."""
        durable, single, batch = verb in _DURABLE, verb in _SINGLE, self.server.batch
        return lambda: self._guarded(verb, lambda: batch.run(attempt, durable, conn, single))

    @staticmethod
    def _guarded(verb: str, attempt: Callable[[], bytes]) -> bytes:
        """A failing database answers INTERNAL_ERROR to that one command; the server goes on.

        Except ``Locked``: another process holds the write lock, nothing was written,
        and the command waits its turn (locks.py). So a handler changes nothing of its
        own state before its write succeeds: it may run again.
        """
        try:
            return attempt()
        except Locked:
            raise
        except Exception:
            log().exception("%s failed", verb)
            return Reply.INTERNAL_ERROR

    def put(self, conn: Conn, cmd: Command, body: bytes) -> None:
        """The second half of put, once its body has arrived: send its reply (or wait)."""
        if body[-2:] != b"\r\n":
            conn.send(Reply.EXPECTED_CRLF)
        elif self.server.draining:
            conn.send(Reply.DRAINING)
        else:
            data = body[:-2]
            self._answer(conn, "put", lambda: self._insert(conn, cmd, data))

    def _insert(self, conn: Conn, cmd: Command, body: bytes) -> bytes:
        pri, delay, ttr, _ = cmd.ints
        tube = conn.use
        try:
            job_id = self.server.q.put(body, tube=tube, priority=pri, ttr=ttr or 1,
                                       delay=max(delay - self.server.skew, 0.0) if delay else 0)
        except JobTooBig:
            return Reply.JOB_TOO_BIG
        self.stats.total_jobs += 1
        self.waiters.after("put")
        return bs.inserted(job_id)

    # -- a job by id --

    def _reserve_job(self, conn: Conn, cmd: Command) -> bytes:
        conn.worker = True
        try:
            return conn.hold(self.server.q.reserve_job(cmd.ints[0]))
        except JobNotFound:
            return Reply.NOT_FOUND

    def _delete(self, conn: Conn, cmd: Command) -> bytes:
        job_id = cmd.ints[0]
        held = conn.reserved.get(job_id)
        if held is not None:
            try:
                return self._delete_held(conn, job_id, held)
            except (JobLost, JobNotFound):
                pass  # its TTR ran out: it may still be deleted as a ready job
        # Ready, delayed and buried jobs may be deleted by anyone, reserved ones only by
        # their holder: take the job unless someone holds it, then delete it under our
        # own lease, so that a worker that reserves it in between keeps it. Held from
        # the claim on, so a delete refused by the lock goes on from there when retried.
        try:
            conn.hold(self.server.q.reserve_job(job_id))
            return self._delete_held(conn, job_id, conn.reserved[job_id])
        except (JobLost, JobNotFound):
            return Reply.NOT_FOUND

    def _delete_held(self, conn: Conn, job_id: int, held: Held) -> bytes:
        """Delete a job this connection holds (JobLost: it no longer does)."""
        try:
            self.server.q.delete(job_id, lease=held.lease)
        except (JobLost, JobNotFound):
            del conn.reserved[job_id]
            raise
        del conn.reserved[job_id]
        self.waiters.after("delete", held.tube)
        return Reply.DELETED

    def _release(self, conn: Conn, cmd: Command) -> bytes:
        job_id, pri, delay = cmd.ints
        held = conn.reserved.get(job_id)
        if held is None:
            return Reply.NOT_FOUND
        try:
            self.server.q.release(job_id, priority=pri, delay=delay, lease=held.lease)
        except (JobLost, JobNotFound):
            return self._lost(conn, job_id)
        del conn.reserved[job_id]
        self.waiters.after("release")
        return Reply.RELEASED

    def _bury(self, conn: Conn, cmd: Command) -> bytes:
        job_id, pri = cmd.ints
        held = conn.reserved.get(job_id)
        if held is None:
            return Reply.NOT_FOUND
        try:
            self.server.q.bury(job_id, priority=pri, lease=held.lease)
        except (JobLost, JobNotFound):
            return self._lost(conn, job_id)
        del conn.reserved[job_id]
        self.waiters.after("bury", held.tube)
        return Reply.BURIED

    def _touch(self, conn: Conn, cmd: Command) -> bytes:
        held = conn.reserved.get(cmd.ints[0])
        if held is None:
            return Reply.NOT_FOUND
        try:
            held.until = self.server.q.touch(cmd.ints[0], lease=held.lease)
        except (JobLost, JobNotFound):
            return self._lost(conn, cmd.ints[0])
        if conn in self.waiters:
            self.waiters.arm()
        return Reply.TOUCHED

    @staticmethod
    def _lost(conn: Conn, job_id: int) -> bytes:
        """A job this connection held is no longer its own (its TTR ran out)."""
        del conn.reserved[job_id]
        return Reply.NOT_FOUND

    def _peek(self, conn: Conn, cmd: Command) -> bytes:
        job = self.server.q.peek(cmd.ints[0])
        if job is None or job.state == "waiting":  # beanstalkd has no waiting jobs
            return Reply.NOT_FOUND
        return bs.found(job.id, job.body)

    def _kick_job(self, conn: Conn, cmd: Command) -> bytes:
        try:
            self.server.q.kick_job(cmd.ints[0])
        except JobNotFound:
            return Reply.NOT_FOUND
        self.waiters.after("kick_job")
        return Reply.KICKED

    def _stats_job(self, conn: Conn, cmd: Command) -> bytes:
        try:
            return bs.ok(self.stats.job_doc(self.server, cmd.ints[0]))
        except JobNotFound:
            return Reply.NOT_FOUND

    # -- tubes --

    def _peek_in_tube(self, conn: Conn, cmd: Command) -> bytes:
        q = self.server.q
        peek = {Verb.PEEK_READY: q.peek_ready, Verb.PEEK_DELAYED: q.peek_delayed,
                Verb.PEEK_BURIED: q.peek_buried}[cmd.verb]
        job = peek(conn.use)
        return Reply.NOT_FOUND if job is None else bs.found(job.id, job.body)

    def _kick(self, conn: Conn, cmd: Command) -> bytes:
        count = self.server.q.kick(cmd.ints[0], tube=conn.use)
        if count:
            self.waiters.after("kick")
        return bs.kicked(count)

    def _use(self, conn: Conn, cmd: Command) -> bytes:
        conn.use = cmd.tube
        return bs.using(conn.use)

    def _watch(self, conn: Conn, cmd: Command) -> bytes:
        if cmd.tube not in conn.watch:
            conn.watch.append(cmd.tube)
        return bs.watching(len(conn.watch))

    def _ignore(self, conn: Conn, cmd: Command) -> bytes:
        if cmd.tube in conn.watch:
            if len(conn.watch) < 2:
                return Reply.NOT_IGNORED
            conn.watch.remove(cmd.tube)
        return bs.watching(len(conn.watch))

    def _list_tubes(self, conn: Conn, cmd: Command) -> bytes:
        return bs.ok(yaml_list(tubes(self.server)))

    def _list_tube_used(self, conn: Conn, cmd: Command) -> bytes:
        return bs.using(conn.use)

    def _list_tubes_watched(self, conn: Conn, cmd: Command) -> bytes:
        return bs.ok(yaml_list(conn.watch))

    def _pause_tube(self, conn: Conn, cmd: Command) -> bytes:
        if cmd.tube not in tubes(self.server):
            return Reply.NOT_FOUND
        delay = cmd.ints[0]
        self.server.q.pause_tube(cmd.tube, max(delay - self.server.skew, 0.001) if delay else 0)
        self.waiters.after("pause_tube")
        return Reply.PAUSED

    def _stats(self, conn: Conn, cmd: Command) -> bytes:
        return bs.ok(self.stats.server_doc(self.server))

    def _stats_tube(self, conn: Conn, cmd: Command) -> bytes:
        doc = self.stats.tube_doc(self.server, cmd.tube)
        return Reply.NOT_FOUND if doc is None else bs.ok(doc)
