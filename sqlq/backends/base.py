"""The storage contract: what the Queue asks of a backend, and nothing more.

A backend is one folder under ``sqlq/backends/``: its SQL (``queries.sql``), its
migrations, its driver calls, how it knows that a process holding reservations
died, and how a blocked worker learns that someone committed. The Queue and
everything above it (the CLI, workers, the beanstalkd server) see only this
module's names, so a third backend is a new folder, not edits everywhere.

The contract, in four parts:

* **transactions**: :meth:`Backend.read`, :meth:`Backend.write` (or
  :meth:`Backend.write_shared`, whose commit other threads' writes may share) and
  :meth:`Backend.transaction` run a function with a connection inside one
  transaction; the backend's :class:`~sqlq.backends.store.Store` does the work
  on that connection, one object per noun (``store.jobs``, ``store.claims``,
  ``store.deps``, ``store.limits``, ...: ``backends/store/``), so the Queue composes
  verbs atomically (delete one job and claim the next in one commit);
* **liveness**: :meth:`Backend.owner_token` registers this process as a holder of
  reservations in a way that ends when the process dies (SIGKILL included), and
  :meth:`Backend.dead_owners` tells which registered holders are surely gone;
* **waiting**: :meth:`Backend.open_notifier` gives a :class:`Notifier` that sleeps
  until another connection may have committed;
* **identity**: :attr:`Backend.location` names the database in messages.
"""

from __future__ import annotations

import abc
import contextlib
from collections.abc import Callable, Sequence
from functools import partial
from typing import TYPE_CHECKING, Any, Literal, Protocol, TypeVar

from .conn import Conn, Cursor, Rows
from .group import Batch, GroupCommit

if TYPE_CHECKING:
    from ..horizon import Horizon
    from ..model import OnProgress
    from .store import Store

T = TypeVar("T")
Durability = Literal["full", "normal"]
#: The connection's protocols (``conn.py``), named here too: the contract's own words.
__all__ = ["Backend", "Conn", "Cursor", "Durability", "Events", "Notifier", "Rows"]


class Events:
    """What woke a waiter: a commit may be visible (``commit``), and/or a process
    holding reservations may have died (``owner``)."""

    __slots__ = ("commit", "owner")

    def __init__(self, commit: bool = False, owner: bool = False) -> None:
        self.commit = commit
        self.owner = owner

    def __bool__(self) -> bool:
        return self.commit or self.owner


class Notifier(Protocol):
    """A wakeup source for one waiting thread (or one event loop).

    ``resume`` starts watching and ``pause`` stops: a watch may cost something on
    every commit, so it is held only while someone waits. After ``resume`` the
    caller looks once more, since events start only then.
    """

    def resume(self) -> None: ...

    def pause(self) -> None: ...

    def fileno(self) -> int | None:
        """A descriptor that becomes readable on an event, for event loops; None if
        this notifier can only be waited on with :meth:`wait`."""

    def drain(self) -> Events:
        """Consume pending events without blocking."""

    def wait(self, timeout: float | None) -> Events:
        """Sleep until an event or ``timeout`` seconds; empty Events on timeout."""

    def recheck_delays(self, first: bool) -> Sequence[float]:
        """After a commit event that found nothing, look again after these delays.

        For a backend whose event can arrive before the commit is visible (SQLite's
        WAL: the frame is written, then published), a short back-off schedule; for
        one that signals only visible commits (PostgreSQL's NOTIFY), none. ``first``:
        the look that begins a wait, which had no event to go by.
        """

    def close(self) -> None: ...


class Backend(abc.ABC):
    """One database a Queue works on. Safe to share between threads."""

    def __init__(self) -> None:
        self._group = GroupCommit(self)

    #: The database as messages name it: a path, or a URL without its password.
    location: str
    durability: Durability
    #: The SQL of every verb, for this backend's dialect, held by noun.
    store: Store[Any]
    #: Seconds between checks for dead holders while other processes hold
    #: reservations, for a backend whose notifier cannot signal a death; None when
    #: it can (SQLite: the kernel closes a dead process's owner file).
    liveness_poll: float | None = None
    #: Whether a statement that fails inside a transaction undoes only its own writes,
    #: the transaction going on (SQLite); PostgreSQL aborts the whole transaction. Then
    #: ``sqlq serve`` runs a one-statement command of a group commit without a
    #: savepoint of its own (server/batch.py).
    statement_atomic = False

    # -- transactions ------------------------------------------------------------------------

    @abc.abstractmethod
    def read(self, fn: Callable[[Conn], T], *, single: bool = False) -> T:
        """Run ``fn(conn)`` without taking a write lock. SQLite reads it all from one
        snapshot; a server backend may give each statement its own (a transaction
        there costs round trips on every wake of a waiter): what must be read together
        is read in one statement, or inside :meth:`transaction`. ``single=True``
        promises one statement, which is its own snapshot: no transaction is opened
        around it (a waiter's look after a wake saves SQLite's BEGIN and COMMIT)."""

    @abc.abstractmethod
    def write(self, fn: Callable[[Conn], T], *, durable: bool = True,
              single: bool = False) -> T:
        """Run ``fn(conn)`` in one write transaction and commit it; retried whole on a
        transient conflict. fn is a verb's storage call (the dispatcher's) or a named
        store function with its arguments bound by ``functools.partial``, never a lambda
        over a face's state: a reader (or a tool) follows the call down to the SQL, and
        the hot path calls fn without unpacking arguments. ``durable=False``: the commit
        may be lost on power loss (a claim, a touch: the job simply comes back).
        ``single=True``: fn writes with one statement, which a backend may run as its
        own autocommit transaction. Inside :meth:`transaction` on the same thread, fn
        joins it."""

    def write_until(self, give_up_at: float, fn: Callable[[Conn], T], *, durable: bool = True,
                    single: bool = False) -> T:
        """:meth:`write` for a call that is pointless after ``give_up_at`` (monotonic
        seconds: the end of the lease it acts under): a backend that waits for a lost
        server (PostgreSQL's reconnect) waits no later, then raises
        :class:`~sqlq.Disconnected`. A backend that never waits for one runs :meth:`write`."""
        return self.write(fn, durable=durable, single=single)

    def write_shared(self, fn: Callable[[Conn], T], *, single: bool = False,
                     batch: Batch | None = None, item: Any = None) -> T:
        """:meth:`write` (durable) for a short write that may share its transaction and
        its commit with writes other threads make at the same time (group commit,
        ``group.py``): one flush for them all, each caller still returning only once
        the commit holding its write is durable, with its own result or exception.
        fn may run on another thread, and again alone if a write of the group fails;
        ``batch`` says how writes of its kind run together (one statement for a run of
        puts; ``item``: this write's part of such a run). Alone, or inside a transaction
        of this thread's own, exactly :meth:`write` (not from inside a ``single=True``
        write's fn, which holds no transaction)."""
        if not self.commits_are_costly:
            return self.write(fn, single=single)
        return self._group.write(fn, single, batch, item)

    def runners(self) -> tuple[Callable[..., Any], Callable[..., Any], Callable[..., Any]]:
        """:meth:`read`, :meth:`write` and :meth:`write_shared` as the dispatcher calls
        them on every verb (``verbs/dispatch.py``), resolved once: a backend whose calls
        are its database's own hands those over, a call less on every verb."""
        if not self.commits_are_costly:
            return self.read, self.write, self._write_alone
        return self.read, self.write, self._group.write

    def _write_alone(self, fn: Callable[[Conn], T], single: bool = False,
                     batch: Batch | None = None, item: Any = None) -> T:
        return self.write(fn, single=single)

    @property
    def commits_are_costly(self) -> bool:
        """Whether a commit costs more than the turns of threads sharing it (a flush to
        the disk, a journal write): then :meth:`write_shared` groups writes."""
        return True

    @abc.abstractmethod
    def transaction(self, durable: bool = True) -> contextlib.AbstractContextManager[Conn]:
        """A write transaction the caller fills; nested use takes a savepoint.
        ``durable=False``: as in :meth:`write` (``sqlq serve`` commits a round of claims
        so). Its BEGIN waits for another process's lock no longer than ``set_lock_wait``
        says, raising :class:`sqlq.Locked`."""

    @abc.abstractmethod
    def in_transaction(self) -> bool:
        """Whether this thread is inside :meth:`write`, :meth:`transaction` or
        :meth:`read` with a transaction open, which a write made now joins (rather than
        wait for another thread: :meth:`write_shared` asks)."""

    @abc.abstractmethod
    def execute_app(self, conn: Conn, sql: str, params: Sequence[Any] | dict[str, Any] = ()
                ) -> list[tuple[Any, ...]]:
        """Run the application's own SQL (its dialect, its parameter style) in conn's
        transaction; return the rows."""

    @abc.abstractmethod
    def set_lock_wait(self, seconds: float | None) -> None:
        """How long a write may wait for a lock another process holds before raising
        :class:`sqlq.Locked` with nothing written; None: the backend's long default
        (an event loop serving other clients sets a short wait and retries later)."""

    # -- liveness of reservation holders -----------------------------------------------------

    @abc.abstractmethod
    def owner_token(self) -> str:
        """This process's token as a holder of reservations, registered on first use
        in a way that ends by itself when the process dies. A holder calls it again on
        every reserve and touch, so a backend can check now and then that the
        registration still stands and make it again if it was lost."""

    @abc.abstractmethod
    def current_owner(self) -> str | None:
        """The token registered by :meth:`owner_token`, or None if none is yet."""

    @abc.abstractmethod
    def dead_owners(self, tokens: Sequence[str]) -> list[str]:
        """The tokens whose process is surely dead. Anything uncertain (a registration
        that cannot be read, a lock that cannot be asked about) counts as alive:
        giving a live holder's job to a second worker is the one thing never to do."""

    def live_owners(self, tokens: Sequence[str]) -> list[str]:
        """The tokens whose process is alive now, for people (the workers registry:
        sqlq/core/registry.py); by default those :meth:`dead_owners` does not find dead. A
        backend that can tell a missing registration from a live one says so here:
        counting a dead worker is the error to avoid, not the reverse."""
        dead = set(self.dead_owners(tokens))
        return [token for token in tokens if token not in dead]

    def reap_owners(self, tokens: Sequence[str]) -> int:
        """Give back the reservations of those of tokens whose holder is surely dead
        (:meth:`dead_owners`); how many came back. A backend where a holder can come
        back to life (its session made again) decides again inside the write."""
        dead = self.dead_owners(tokens)
        if not dead:
            return 0
        released = self.write(partial(self.store.claims.release_owners, owners=dead),
                              durable=False)
        for token in dead:
            self.forget_owner(token)
        return released

    @abc.abstractmethod
    def owner_info(self, token: str) -> tuple[str, int | None]:
        """(host, pid) of the process that registered token, for people (the dashboard)."""

    @abc.abstractmethod
    def forget_owner(self, token: str) -> None:
        """Remove what is left of a dead owner's registration."""

    # -- waiting -----------------------------------------------------------------------------

    @abc.abstractmethod
    def open_notifier(self) -> Notifier:
        """A new notifier, owned (and closed) by the caller, watching from now on."""

    # -- operations --------------------------------------------------------------------------

    @abc.abstractmethod
    def maintain(self, progress: OnProgress | None = None) -> dict[str, Any]:
        """Do the housekeeping this backend needs now and then (``sqlq maintain``) and
        report what an operator should know: size, bloat, what holds cleanup back;
        ``progress(steps done, fraction)`` after each step."""

    def reclaim(self, stop: float | None = None) -> int:
        """Give the space of deleted rows back to the file system, in short writes, until
        done or ``time.monotonic()`` passes ``stop``; how many pages. Nothing where the
        database does it itself (PostgreSQL's autovacuum) or cannot."""
        return 0

    @abc.abstractmethod
    def horizon(self, now: int) -> Horizon:
        """What holds back the cleanup of deleted jobs as of ``now`` (ms): the oldest
        snapshot's holder on PostgreSQL, the WAL's size and starvation on SQLite
        (:mod:`sqlq.horizon`). A read, cheap enough for a gauge; not for a hot path."""

    def snapshot_into(self, path: str, progress: OnProgress | None = None) -> bool:
        """Write a consistent copy of the whole database, as of one moment, into the empty
        file at path (made by the caller, mode 0600), while other processes go on writing,
        calling ``progress(bytes written, fraction)`` as it goes; False where the
        database is not a file to copy (``sqlq backup`` then copies its rows into a new
        SQLite file, as ``sqlq copy`` does)."""
        return False

    def check_integrity(self) -> str | None:
        """The database's own full check of itself: ``"ok"`` or the first problem found;
        None where it has none to run (a server checks its own storage)."""
        return None

    # -- identity and life -------------------------------------------------------------------

    def connect(self) -> None:
        """Connect now if this backend has no connection yet, and say at once if that
        cannot be done: :class:`~sqlq.Disconnected` if the server cannot be reached. A
        backend on a server opens without it (its first call connects, waiting for the
        server as after a lost connection); the CLI and ``sqlq work`` ask here to say so
        at once, or to wait in their own way. A file is open from the start."""
        return

    def child_location(self) -> str:
        """What a child process (``sqlq work -- COMMAND``) gets as ``SQLQ_DB`` to open
        this same database."""
        return self.location

    @abc.abstractmethod
    def close(self) -> None:
        """Close connections and give up this process's registration."""
