"""The verbs every backend runs on its own connection: the Queue's whole use of SQL,
held by noun.

A backend's ``queries.sql`` holds one named statement per verb, in its dialect; the
noun stores here run them. Most take their parameters by name, in a dict (``:name``
in SQLite, ``%(name)s`` in PostgreSQL). The hottest take a positional tuple instead,
which binds faster (``?``/``?1`` in SQLite, ``%s`` in PostgreSQL), in the order
their description in ``queries.sql`` lists: the puts' inserts, the one-tube claim,
the worker's ``delete_leased_job``.

:class:`Store` holds one object per noun: ``jobs``, ``claims``, ``deps``, ``limits``,
``control``, ``results``, ``topics``, ``history``, ``workers``, ``views``, ``copying``.
Each is a plain class given the dialect's statements (``Q``) and the sibling nouns it
calls (a delete-and-claim deletes through ``jobs``; a limited claim claims through
``claims``); none inherits from another. Where the dialects differ (how an insert
learns its id, how a claim folds in due jobs, how a list is passed) a backend subclasses
that noun (``sqlite/store.py``, ``postgres/store.py``) and its own Store builds it.

Every method takes an open connection inside the caller's transaction and the
time in ms (``now``), and either does its one thing or raises: JobNotFound when
no job matches, JobLost when a lease was given and is no longer live.
"""

from __future__ import annotations

from .claims import ClaimStore
from .control import ControlStore
from .copying import CopyStore
from .deps import DependencyStore
from .history import HistoryStore
from .jobs import JobStore
from .limits import LimitStore
from .results import ResultStore, TopicStore
from .views import ViewStore
from .workers import WorkerStore

__all__ = ["ClaimStore", "ControlStore", "CopyStore", "DependencyStore", "HistoryStore",
           "JobStore", "LimitStore", "ResultStore", "Store", "TopicStore", "ViewStore",
           "WorkerStore"]


class Store:
    """A backend's SQL verbs, one object per noun. The dialect gives the nouns it
    overrides; the others are built here, over the same statements."""

    def __init__(self, Q: dict[str, str], jobs: JobStore, claims: ClaimStore,
                 limits: LimitStore, copying: CopyStore) -> None:
        #: The dialect's statements by name (queries.sql), for the backend's own upkeep.
        self.Q = Q
        self.jobs = jobs
        self.claims = claims
        self.limits = limits
        self.copying = copying
        self.deps = DependencyStore(Q, jobs)
        self.control = ControlStore(Q, jobs)
        self.results = ResultStore(Q, jobs)
        self.topics = TopicStore(Q)
        self.history = HistoryStore(Q)
        self.workers = WorkerStore(Q)
        self.views = ViewStore(Q)
