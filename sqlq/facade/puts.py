"""What puts jobs in: put, put_many, publish (and the subscriptions it follows), and
the Transaction that puts them together with the application's own SQL.

The Queue's producing verbs, in a class of their own (:class:`Puts`, which
:class:`~sqlq.Queue` inherits): each describes its put once (``putting.describe_put``)
and calls the one put verb (``verbs/contract.py``).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any, Concatenate, ParamSpec, TypeVar

from ..enqueue import dbapi_connection, verbs_on
from ..model import DEFAULT_PRIORITY, DEFAULT_TTR, DEFAULT_TUBE, check_body
from ..putting import describe_put

if TYPE_CHECKING:
    from ..backends import Backend
    from ..backends.base import Conn
    from ..verbs import Operations, Verbs

_P = ParamSpec("_P")
_R = TypeVar("_R")


class Puts:
    """The Queue's producing verbs (see :class:`~sqlq.Queue` for the class's docs)."""

    # Set by Queue.__init__.
    _backend: Backend
    verbs: Verbs
    operations: Operations
    max_job_size: int

    # -- put ---------------------------------------------------------------------------------

    def put(self, body: bytes | str, *, tube: str = DEFAULT_TUBE,
            priority: int = DEFAULT_PRIORITY, delay: float = 0, ttr: float = DEFAULT_TTR,
            unique_key: str | None = None,
            after: int | Iterable[int] | None = None, on_conflict: str = "keep",
            group: str | None = None) -> int:
        """Add a job and return its id (durable when this returns, in ``full`` mode).

        With ``unique_key``, while a job with that key is live in the tube, return
        that job's id and insert nothing.

        With ``on_conflict="replace"`` too (debounce), while a ready, delayed or waiting
        job holds the key, that job takes this put's body, priority, ttr and delay
        (counted from now) and keeps its id, which is returned. A reserved or buried job
        is never changed: a new job takes the key and waits for it (as ``after=`` does),
        so the work runs again once the running one is done.

        With ``after``, the job waits (state ``waiting``) until every one of those jobs
        is gone (deleted or completed by any path; a buried one is not gone), then
        becomes ready, or delayed by ``delay`` counted from that moment. Parents
        already gone count as finished. A waiting job holds its ``unique_key``; a put
        whose key is held returns the holder's id and changes none of its parents.

        With ``group``, the job belongs to that group of its tube: among a tube's ready
        jobs of the same priority, claims take the groups in turn (the one served longest
        ago first; jobs without a group count as one group), first in, first out within
        a group, and :meth:`limit`'s ``group_concurrency`` and ``group_rate`` cap each group.

        Args:
            body: the job's bytes (a str is UTF-8 encoded).
            tube: the tube to put it in.
            priority: 0 (most urgent) to 2**32-1; ties go first in, first out.
            delay: seconds before the job is ready.
            ttr: seconds a reservation of it lasts (at least 1).
            unique_key: while a job with this key is live in the tube, put nothing.
            after: a job id, or an iterable of ids: the jobs this one waits for.
            on_conflict: ``"keep"`` (the live job with the key stays as it is) or
                ``"replace"`` (it is replaced, see above; needs ``unique_key``, and
                cannot be combined with ``after``).
            group: the job's group: a non-empty str of at most 200 characters, or None.

        Raises:
            JobNotFound: an id of ``after`` was never issued (nothing is put).
            JobTooBig: the body is larger than ``max_job_size``.
            InvalidTube: ``tube`` is not a valid tube name.
            TypeError: an argument has the wrong type (the message names it).
            ValueError: an argument is out of range (the message names it), or
                ``on_conflict`` is not ``"keep"`` or ``"replace"``, or is ``"replace"``
                without ``unique_key`` or with ``after``.

        Examples:
            >>> q.put(b"resize 42.jpg", tube="thumbs", priority=10, ttr=120)
            1
            >>> q.put("welcome a@example.com", tube="emails", unique_key="welcome:a")
            2
            >>> q.put("reindex", unique_key="reindex:42", delay=5, on_conflict="replace")
            >>> q.put(b"sync", tube="syncs", group="acct-42")
            3
        """
        if body.__class__ is not bytes or len(body) > self.max_job_size:
            body = check_body(body, self.max_job_size)
        return self.verbs.put(describe_put(tube, priority, delay, ttr, unique_key, after,
                                           on_conflict, group), body)

    def put_many(self, bodies: Iterable[bytes | str], *, tube: str = DEFAULT_TUBE,
                 priority: int = DEFAULT_PRIORITY, delay: float = 0,
                 ttr: float = DEFAULT_TTR,
                 after: int | Iterable[int] | None = None,
                 group: str | None = None) -> list[int]:
        """Add many jobs in one transaction (all or none); return their ids in order.

        With ``after``, every job of the batch waits for the same parents; with
        ``group``, every job is in that group (see :meth:`put`).

        Raises:
            JobNotFound: an id of ``after`` was never issued (nothing is put).
            JobTooBig: a body is larger than ``max_job_size`` (nothing is put).
            InvalidTube: ``tube`` is not a valid tube name.
            TypeError: ``bodies`` is a single body or not iterable, or an option has
                the wrong type.

        Examples:
            >>> q.put_many([b"a", b"b", b"c"], tube="letters")
            [3, 4, 5]
        """
        if isinstance(bodies, (bytes, str)):
            raise TypeError("bodies must be an iterable of bodies, not a single body")
        try:
            items = iter(bodies)
        except TypeError:
            raise TypeError(f"bodies must be an iterable of bodies, not {type(bodies).__name__}"
                            ) from None
        put = describe_put(tube, priority, delay, ttr, None, after, group=group)
        checked = [check_body(b, self.max_job_size) for b in items]
        return self.verbs.put_many(put, checked)

    def subscribe(self, topic: str, tube: str) -> None:
        """Have :meth:`publish` to ``topic`` put a copy into ``tube`` (idempotent).

        Raises:
            InvalidTube: ``topic`` or ``tube`` is not a valid name (topics follow tube rules).

        Examples:
            >>> q.subscribe("orders", "emails"); q.subscribe("orders", "audit")
        """
        self.operations.subscribe(topic, tube)

    def unsubscribe(self, topic: str, tube: str) -> bool:
        """Stop copying ``topic`` into ``tube``; True if it was subscribed."""
        return self.operations.unsubscribe(topic, tube)

    def publish(self, topic: str, body: bytes | str, *, priority: int = DEFAULT_PRIORITY,
                delay: float = 0, ttr: float = DEFAULT_TTR,
                unique_key: str | None = None, on_conflict: str = "keep") -> list[int]:
        """Put one copy of a job into every tube subscribed to ``topic``, in one transaction.

        Returns the ids in tube-name order; ``[]`` when nothing is subscribed.
        Subscribers pull: a worker that was down finds every copy in its tube.
        ``unique_key`` and ``on_conflict`` act in each tube as in :meth:`put`.

        Raises:
            JobTooBig: the body is larger than ``max_job_size``.
            InvalidTube: ``topic`` is not a valid name.

        Examples:
            >>> q.publish("orders", b'{"order": 7}')  # -> [id in audit, id in emails]
            [8, 9]
        """
        put = describe_put(topic, priority, delay, ttr, unique_key, None, on_conflict,
                           name="topic")
        copies = self.verbs.publish(put, check_body(body, self.max_job_size))
        return [job_id for _, job_id in copies]

    # -- the verbs of a transaction -------------------------------------------------------------

    def verbs_in(self, conn: Any) -> Verbs:
        """The verbs that write in ``conn``'s transaction, for ``Job.step(conn=)`` (sqlq's
        own faces, not applications): a ``sqlq.Transaction``'s (its Queue's calls on this
        thread join it), else those on the application's own connection (as ``sqlq.put``;
        Django's and SQLAlchemy's unwrapped to their DB-API connection)."""
        sync = getattr(conn, "sync", None)  # an AsyncTransaction
        if isinstance(sync, Transaction):
            conn = sync
        if isinstance(conn, Transaction):
            return conn.queue.verbs
        try:
            return verbs_on(dbapi_connection(conn))
        except TypeError:
            raise TypeError("conn must be a sqlq.Transaction, or a sqlite3, psycopg, Django or "
                            f"SQLAlchemy connection, not {type(conn).__name__}") from None


def _in_transaction(verb: Callable[Concatenate[Puts, _P], _R]
                    ) -> Callable[Concatenate[Transaction, _P], _R]:
    """The Queue's ``verb`` as a Transaction's: the same signature, inside the transaction
    (the Queue's calls on the thread holding it join it)."""

    name = verb.__name__

    @functools.wraps(verb)
    def call(self: Transaction, /, *args: _P.args, **kwargs: _P.kwargs) -> _R:
        # By name: a subclass of Queue that overrides the verb is obeyed here too.
        method: Callable[_P, _R] = getattr(self.queue, name)
        return method(*args, **kwargs)

    call.__qualname__ = f"Transaction.{name}"
    call.__module__ = __name__  # documented here (functools.wraps copied the verb's)
    call.__doc__ = f"``Queue.{name}`` inside this transaction."
    return call


class Transaction:
    """What ``with q.transaction() as tx`` hands out: SQL and puts in one commit."""

    def __init__(self, queue: Puts, conn: Conn) -> None:
        #: The Queue the transaction is of (a Puts: this module stands below the Queue).
        self.queue = queue
        self._conn = conn

    def execute(self, sql: str,
                params: Sequence[Any] | dict[str, Any] = ()) -> list[tuple[Any, ...]]:
        """Run the application's own SQL in the transaction (the backend's dialect and
        parameter style); return the rows."""
        return self.queue._backend.execute_app(self._conn, sql, params)

    put = _in_transaction(Puts.put)
    """:meth:`Queue.put <sqlq.Queue.put>` inside this transaction (the same arguments)."""
    put_many = _in_transaction(Puts.put_many)
    """:meth:`Queue.put_many <sqlq.Queue.put_many>` inside this transaction."""
    publish = _in_transaction(Puts.publish)
    """:meth:`Queue.publish <sqlq.Queue.publish>` inside this transaction."""
