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

:data:`ALL` is the one list of every verb's record, :data:`WAKES` what each name's commit
may give waiters. A put is described once, checked, by :func:`sqlq.putting.describe_put`.
"""

from .contract import VERBS, Verbs
from .dispatch import FREES, READIES, RECEIVE, SEND, SETTLE, Dispatcher, Verb
from .engine import CLAIMS
from .operations import OPERATIONS, Operations
from .views import READS, Views

#: Every verb's record: the contract's, the operations', the reads', the engine's.
ALL: tuple[Verb, ...] = VERBS + OPERATIONS + READS + CLAIMS


def _wakes() -> dict[str, int]:
    by_name: dict[str, set[int]] = {}
    for verb in ALL:
        by_name.setdefault(verb.name, set()).add(verb.wakes)
    return {name: wakes.pop() for name, wakes in by_name.items() if len(wakes) == 1}


#: What each verb's commit may give waiters (``Verb.wakes``), by the verb's name, which
#: the faces' methods share (``Queue.release``, ``Job.release``, the server's "release"):
#: the faces that keep waiters of their own read it here rather than each deciding. A
#: name whose records differ ("reserve": a claim alone, or a delete and a claim) is not
#: here; its face knows which it ran.
WAKES: dict[str, int] = _wakes()

__all__ = ["ALL", "CLAIMS", "Dispatcher", "FREES", "OPERATIONS", "Operations", "READIES",
           "READS", "RECEIVE", "SEND", "SETTLE", "VERBS", "Verb", "Verbs", "Views", "WAKES"]
