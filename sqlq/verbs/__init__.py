"""The verbs: what every face of sqlq calls, each defined once.

* ``dispatch.py``: :class:`Verb` (a verb's transaction, span and lost-connection rule)
  and the :class:`Dispatcher` that applies them, once, to every verb;
* ``contract.py``: :class:`Verbs`, every verb that puts or changes jobs, each with its
  record and its one storage call;
* ``views.py``: :class:`Views` (``q.views``), the read verbs for people and monitors;
* the reservation engine (``sqlq/engine.py``): claims and the waits around them, through
  the same dispatcher.

A put is described once, checked, by :func:`sqlq.model.describe_put`.
"""

from .contract import VERBS, Verbs
from .dispatch import RECEIVE, SEND, SETTLE, Dispatcher, Verb
from .views import READS, Views

__all__ = ["READS", "RECEIVE", "SEND", "SETTLE", "VERBS", "Dispatcher", "Verb", "Verbs",
           "Views"]
