"""What every framework integration needs: one rule for where a put goes.

A web request writes its rows in a transaction of the framework's (Django's
``transaction.atomic()``, a Flask-SQLAlchemy session). A job put during that
request must share the transaction's fate: a rolled-back request enqueues nothing,
and a committed one loses no job. Two ways to get there, chosen by
:func:`same_database`:

* the queue lives in the application's own database: the put joins the
  application's transaction through its own connection (:func:`sqlq.put`), so the
  job and the rows commit together, atomically, in one commit;
* the queue is a separate database: no transaction spans both, so a put made
  inside a transaction waits for the commit (the framework's on-commit hook) and
  is dropped on rollback. A crash between the commit and the put loses that job:
  the price of two databases, said in the docs.

Outside any transaction (autocommit) a put is made at once either way.

The API is two functions, :func:`same_database` and :func:`put`; a framework
module supplies the connection, whether a transaction is open, and its on-commit
hook.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from ..backends import for_connection
from ..model import DEFAULT_PRIORITY, DEFAULT_TTR, DEFAULT_TUBE, check_body
from ..putting import describe_put

if TYPE_CHECKING:
    from ..queue import Queue

#: How a framework runs a function once its current transaction commits (never on a
#: rollback): Django's ``transaction.on_commit``, a SQLAlchemy ``after_commit`` hook.
OnCommit = Callable[[Callable[[], None]], None]


def same_database(location: str, conn: Any) -> bool:
    """True if the DB-API connection ``conn`` reads and writes the database at
    ``location`` (a Queue's file path or ``postgresql://`` URL).

    Args:
        location: the queue's database, as given to :class:`sqlq.Queue`.
        conn: an open ``sqlite3.Connection`` or ``psycopg.Connection`` of the
            application (e.g. Django's ``connections[alias].connection``).

    Returns:
        False for another kind of connection, an in-memory SQLite database, or a
        different file, database, host or port.
    """
    try:
        backend = for_connection(conn)
    except TypeError:
        return False
    return backend.same_database(conn, location)


def put(queue: Callable[[], Queue], body: bytes | str, *, max_job_size: int,
        conn: Any | None, in_transaction: bool, on_commit: OnCommit,
        **options: Any) -> int | None:
    """Put ``body`` so that it shares the fate of the application's transaction.

    Args:
        queue: returns the configured Queue; called only for a put that goes through
            it (not through ``conn``), so that no Queue is opened inside the
            application's write transaction, where its first open could wait for
            that very transaction's lock.
        body: the job body.
        max_job_size: the largest body accepted (the Queue's ``max_job_size``).
        conn: the application's DB-API connection when it shares the queue's database
            (see :func:`same_database`): the put joins its transaction, or on an
            autocommit connection commits at once. None when the queue is separate.
        in_transaction: the application has a transaction open (``atomic()``), so a
            put into a separate queue must wait for its commit.
        on_commit: the framework's hook that runs a function after that commit.
        options: ``tube``, ``priority``, ``delay``, ``ttr``, ``unique_key``, ``after``,
            ``on_conflict``, as :meth:`sqlq.Queue.put`.

    Returns:
        The job's id, or None when the put waits for the application's commit (there
        is no job yet: a rollback means there never will be).
    """
    if conn is not None:
        from ..enqueue import put as put_through

        return put_through(conn, body, max_job_size=max_job_size, **options)
    if in_transaction:
        _check(max_job_size, body, **options)  # fail in the request, not after the commit
        on_commit(lambda: _put_after_commit(queue, body, options))
        return None
    return queue().put(body, **options)


def _check(max_job_size: int, body: bytes | str, *, tube: str = DEFAULT_TUBE,
           priority: int = DEFAULT_PRIORITY, delay: float = 0, ttr: float = DEFAULT_TTR,
           unique_key: str | None = None, after: int | Iterable[int] | None = None,
           on_conflict: str = "keep") -> None:
    """Queue.put's checks, for a put that will be made later (whether ``after``'s ids were
    issued is known only then: the commit's put raises JobNotFound)."""
    check_body(body, max_job_size)
    describe_put(tube, priority, delay, ttr, unique_key, after, on_conflict)


def _put_after_commit(queue: Callable[[], Queue], body: bytes | str,
                      options: dict[str, Any]) -> None:
    queue().put(body, **options)


__all__ = ["OnCommit", "put", "same_database"]
