"""The verbs: what every face of sqlq calls, each defined once.

* ``dispatch.py``: :class:`Verb` (a verb's transaction, span and lost-connection rule)
  and the :class:`Dispatcher` that applies them, once, to every verb;
* ``contract.py``: :class:`Verbs`, every verb that puts or changes jobs, each with its
  record and its one storage call;
* ``views.py``: :class:`Views` (``q.views``), the read verbs for people and monitors;
* ``operations.py``: :class:`Operations`, the others (subscriptions, limits and pauses,
  the workers registry, the histories, the looks of waiters and workers);
* ``engine.py``: the reservation engine, claims and the waits around them
  (``waiting.py``), through the same dispatcher.

:data:`ALL` is the one list of every verb's record. A put is described once, checked, by
:func:`sqlq.putting.describe_put`.
"""

from .contract import VERBS, Verbs
from .dispatch import RECEIVE, SEND, SETTLE, Dispatcher, Verb
from .engine import CLAIMS
from .operations import OPERATIONS, Operations
from .views import READS, Views

#: Every verb's record: the contract's, the operations', the reads', the engine's.
ALL: tuple[Verb, ...] = VERBS + OPERATIONS + READS + CLAIMS

__all__ = ["ALL", "CLAIMS", "Dispatcher", "OPERATIONS", "Operations", "READS", "RECEIVE",
           "SEND", "SETTLE", "VERBS", "Verb", "Verbs", "Views"]
