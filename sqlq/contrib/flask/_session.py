"""Puts that follow an SQLAlchemy session's transaction: joined, or deferred to its commit.

* The queue shares the session's database: the put runs through the session's own
  DB-API connection (``sqlq.put(conn)``), inside its transaction, so the job and the
  rows commit or roll back together, with nothing left to do at commit time.
* The queue is elsewhere: the put is kept on the session (``session.info``) and made
  when the outermost transaction commits, all of the session's jobs in one queue
  transaction; a rollback drops them, as does a rolled-back savepoint (its own
  puts and those of savepoints inside it), and so does a session closed without
  a commit (the end of a request that never committed).

A deferred put is at most once on failure: if the queue refuses it after the
application's commit (its disk is full), the error reaches the caller of
``commit()``, the rows are committed and the jobs are not.

Which of the two happens is ``sqlq.contrib._shared.put``'s rule, shared with Django;
this module is SQLAlchemy's side of it: the session's connection, and its on-commit
hook (Django has ``transaction.on_commit``; SQLAlchemy has events).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from sqlalchemy.orm import Session, SessionTransaction

    from ...queue import Queue

#: The session.info key of the puts waiting for the session's commit.
PENDING = "sqlq.pending"
_listening = False
_listening_lock = threading.Lock()


def session_in_transaction(extensions: dict[str, Any]) -> Session | None:
    """The app's Flask-SQLAlchemy session (for the current app context) if a transaction
    is under way in it, else None (no Flask-SQLAlchemy, or nothing begun)."""
    db = extensions.get("sqlalchemy")
    if db is None:
        return None
    session: Session = db.session()
    return session if session.in_transaction() else None


def defer(session: Session, queue: Queue, fn: Callable[[], object]) -> None:
    """Run ``fn()`` (a put into ``queue``) when the session's outermost transaction
    commits; never if the transaction, or the savepoint open now, rolls back. The
    session's deferred puts into one queue share one transaction of that queue."""
    _listen()
    tag = session.get_nested_transaction()  # None: the outermost transaction
    session.info.setdefault(PENDING, []).append((tag, queue, fn))


def _within(tag: SessionTransaction | None, ended: SessionTransaction) -> bool:
    while tag is not None:
        if tag is ended:
            return True
        tag = tag.parent
    return False


def _after_commit(session: Session) -> None:
    if session.get_nested_transaction() is not None:
        return  # a savepoint released: its puts wait for the outermost commit
    pending = session.info.pop(PENDING, None)
    if not pending:
        return
    queue = pending[0][1]  # one session, one app, one queue
    with queue.transaction():
        for _tag, _queue, fn in pending:
            fn()


def _after_soft_rollback(session: Session, previous: SessionTransaction) -> None:
    pending = session.info.get(PENDING)
    if not pending:
        return
    if previous.parent is None:
        session.info.pop(PENDING, None)
    else:
        session.info[PENDING] = [p for p in pending if not _within(p[0], previous)]


def _after_transaction_end(session: Session, transaction: SessionTransaction) -> None:
    if transaction.parent is None:  # ended without after_commit: closed, or rolled back
        session.info.pop(PENDING, None)


def _listen() -> None:
    """Install the three listeners once, on every Session of the process: a session
    without deferred puts costs them one dict lookup."""
    global _listening
    with _listening_lock:
        if _listening:
            return
        from sqlalchemy import event
        from sqlalchemy.orm import Session

        event.listen(Session, "after_commit", _after_commit)
        event.listen(Session, "after_soft_rollback", _after_soft_rollback)
        event.listen(Session, "after_transaction_end", _after_transaction_end)
        _listening = True


__all__ = ["PENDING", "defer", "session_in_transaction"]
