"""Group commit: short durable writes from threads sharing one backend share one commit.

A backend has one connection, which its threads take turns on, and every durable
commit pays for a flush (an fsync of SQLite's WAL in ``full`` mode, a round trip
and a WAL flush on PostgreSQL) that costs more than the write itself. So threads
that write while a commit is in flight do not each wait for a commit of their
own: they queue their write, and when that commit lands the first of them leads.
The leader runs every queued write in one transaction, commits once, and hands
each writer its own result or exception; nobody returns before the commit that
holds their write is durable. A lone writer goes straight through, exactly as a
plain :meth:`Backend.write` (the leader/follower queue of MySQL's binlog group
commit and LevelDB's writer queue, inside one process).

One writer's failure is never its neighbours': the shared transaction runs without
savepoints (a savepoint is two more statements, two more round trips to a server),
and when a write raises, that transaction is rolled back and run again with each
write under a savepoint of its own. A write that fails there is finally run alone,
so what its caller sees is what it would have seen without anyone else around; if
the database itself fails under a write (a full disk, a lost connection), the
transaction is rolled back and every write of the group is run alone.

Writes of one kind (the puts of several threads) may say how to run together
(:class:`Batch`): the leader then runs a run of them as one call, on a server one
statement and one round trip for them all (PostgreSQL inserts them with one
``unnest``), instead of one round trip each between BEGIN and COMMIT.

A thread inside a transaction of its own (``Queue.transaction``, a write's
function) joins it, as every write does: an explicit transaction is never merged
with other threads' writes.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol, TypeVar

from ..errors import DatabaseError

if TYPE_CHECKING:
    from .conn import Conn

T = TypeVar("T")

#: The most writes one commit takes: bounds how long the last of them waits for it.
MAX_GROUP = 64


class BatchRun(Protocol):
    """A kind's ``run``: the writes of items, in one call, their results in order."""

    def __call__(self, conn: Conn, items: list[Any]) -> list[Any]: ...


class Batch(NamedTuple):
    """How writes of one kind may run together: ``run(conn, items=...)`` does the writes of
    every item (each write's ``item``) and returns their results in order (writes are of
    a kind when their ``run`` is equal); ``single``: in one statement that checks nothing
    of its own (only the database can fail it). Made once per kind; a write's own
    function stays what runs it alone, and under a savepoint when a write of the group
    fails."""

    run: BatchRun
    single: bool = False


class _Write:
    """One queued write, and what became of it."""

    __slots__ = ("fn", "single", "batch", "item", "lead", "error", "value", "_wake")

    def __init__(self, fn: Callable[[Conn], Any], single: bool, batch: Batch | None,
                 item: Any) -> None:
        self.fn = fn
        self.single = single
        self.batch = batch
        self.item = item
        #: Woken to lead the next group rather than with an outcome.
        self.lead = False
        self.error: BaseException | None = None
        self.value: Any = None
        # A bare lock is the cheapest thing to block on: taken now, taken again by
        # the waiting writer (blocking), released once by whoever wakes it.
        self._wake = threading.Lock()
        self._wake.acquire()

    def wait(self) -> None:
        self._wake.acquire()

    def wake(self) -> None:
        self._wake.release()

    def settle(self, value: Any = None, error: BaseException | None = None) -> None:
        self.value, self.error = value, error

    def outcome(self) -> Any:
        if self.error is not None:
            raise self.error
        return self.value


class _WriteFailed(Exception):
    """A write raised inside the shared transaction (which is rolled back)."""


class _Aborted(Exception):
    """The database failed under a write: the shared transaction is rolled back."""


class Writer(Protocol):
    """What group commit asks of the backend that holds it (``Backend``'s own verbs):
    named here, so the contract can hold its commit queue without a circle."""

    location: str

    def write(self, fn: Callable[[Conn], T], *, durable: bool = True,
              single: bool = False) -> T: ...

    def transaction(self, durable: bool = True) -> contextlib.AbstractContextManager[Conn]: ...

    def in_transaction(self) -> bool: ...


class GroupCommit:
    """The commit queue of one backend (see the module's docstring)."""

    def __init__(self, backend: Writer) -> None:
        self._backend = backend
        self._mutex = threading.Lock()
        self._queue: list[_Write] = []
        #: Whether a writer holds the turn (writing alone or leading a group).
        self._busy = False

    def write(self, fn: Callable[[Conn], T], single: bool = False,
              batch: Batch | None = None, item: Any = None) -> T:
        """``backend.write(fn, single=single)``, durable, possibly sharing its commit."""
        backend = self._backend
        with self._mutex:
            alone = not self._busy
            self._busy = True
        if alone:
            try:
                return backend.write(fn, single=single)
            finally:
                self._pass_turn()
        if backend.in_transaction():
            # This thread's own transaction: join it (the leader may be waiting for it).
            return backend.write(fn, single=single)
        me = _Write(fn, single, batch, item)
        with self._mutex:
            if self._busy:
                self._queue.append(me)
            else:  # the turn ended meanwhile
                self._busy = True
                me.lead = True
                self._queue.insert(0, me)
        if not me.lead:
            try:
                me.wait()
            except BaseException:  # KeyboardInterrupt in the main thread
                self._withdraw(me)
                raise
        if me.lead:
            self._lead()
        result: T = me.outcome()
        return result

    def _pass_turn(self) -> None:
        """Wake the first queued writer to lead the next group, or end the turn."""
        with self._mutex:
            if self._queue:
                first = self._queue[0]
                first.lead = True
                first.wake()
            else:
                self._busy = False

    def _withdraw(self, me: _Write) -> None:
        """Take back a write whose caller stopped waiting, unless a leader has it already
        (then it runs, and its outcome goes unread); if it was woken to lead, wake the
        next in line instead, or the turn would never end."""
        with self._mutex:
            if me not in self._queue:
                return
            self._queue.remove(me)
            promoted = me.lead
        if promoted:
            self._pass_turn()

    def _lead(self) -> None:
        """Run the queued writes (this thread's first) in one commit; wake the others."""
        with self._mutex:
            group = self._queue[:MAX_GROUP]
            del self._queue[:MAX_GROUP]
        try:
            self._run(group)
        except BaseException as e:
            # The leader was interrupted (KeyboardInterrupt, SystemExit): it raises that;
            # the others learn that their write is in doubt (an outcome already set may
            # be of a transaction that was then rolled back).
            doubt = DatabaseError(f"{self._backend.location}: the thread committing this "
                                  f"write was interrupted ({type(e).__name__}); it may or may "
                                  "not have been committed")
            for w in group[1:]:
                w.settle(error=doubt)
            raise
        finally:
            for w in group[1:]:
                w.wake()
            self._pass_turn()

    def _run(self, group: list[_Write]) -> None:
        """Give every write of the group its outcome."""
        backend = self._backend
        if len(group) == 1:
            self._alone(group)
            return
        first = group[0].batch
        one_statement = first is not None and first.single and all(
            w.batch is not None and w.batch.run == first.run for w in group)
        try:
            if one_statement:
                # Committed on its own, one statement has no write's own check to fail:
                # what fails is the database, and the statement may have committed unseen
                # (a lost connection), so no write runs again; each caller gets the error,
                # as from a failed COMMIT (below).
                assert first is not None
                items = [w.item for w in group if w.batch is not None]
                values = backend.write(partial(first.run, items=items), single=True)
            else:
                values = backend.write(partial(self._together, group=group))
        except _WriteFailed:
            pass
        except Exception as e:  # noqa: BLE001 - BEGIN or COMMIT failed: every write did
            for w in group:
                w.settle(error=e)
            return
        else:
            for w, value in zip(group, values, strict=True):
                w.settle(value)
            return
        try:
            failed = backend.write(partial(self._apart, group=group))
        except _Aborted:
            failed = group
        except Exception as e:  # noqa: BLE001 - BEGIN or COMMIT failed: every write did
            for w in group:
                w.settle(error=e)
            return
        self._alone(failed)

    @staticmethod
    def _together(conn: Conn, group: list[_Write]) -> list[Any]:
        """Every write in this transaction, each run of writes of a kind in one call; the
        first to raise rolls it all back."""
        values: list[Any] = []
        start = 0
        while start < len(group):
            batch = group[start].batch
            end = start + 1
            while batch is not None and end < len(group) and \
                    (other := group[end].batch) is not None and other.run == batch.run:
                end += 1
            try:
                if batch is not None and end - start > 1:
                    values += batch.run(conn, [w.item for w in group[start:end]])
                else:
                    values.append(group[start].fn(conn))
            except Exception as e:
                raise _WriteFailed from e
            start = end
        return values

    def _apart(self, conn: Conn, group: list[_Write]) -> list[_Write]:
        """Every write in this transaction, each under a savepoint; the ones that raised
        (their savepoint rolled back), to be run alone."""
        backend = self._backend
        failed = []
        for w in group:
            try:
                with backend.transaction() as savepoint:
                    w.settle(w.fn(savepoint))
            except DatabaseError as e:
                # The database failed, not the write's own check (a full disk, a lost
                # connection): the transaction may be over. Roll it all back.
                raise _Aborted from e
            except Exception:  # noqa: BLE001 - JobNotFound, JobLost...: run alone next
                failed.append(w)
        return failed

    def _alone(self, writes: list[_Write]) -> None:
        """Each write in a transaction of its own, as if no other thread were writing."""
        for w in writes:
            try:
                w.settle(self._backend.write(w.fn, single=w.single))
            except Exception as e:  # noqa: BLE001 - its caller raises it
                w.settle(error=e)
