"""Storage backends behind one contract (``base.py``): a folder per backend.

* ``sqlite/``: one SQLite file (the default: a path);
* ``postgres/``: a PostgreSQL database (a ``postgresql://`` URL).

Nothing outside this package imports a backend's modules: the Queue asks
:func:`open_backend` for one and speaks to it through :class:`Backend`.
"""

from .base import Backend, Events, Notifier, exists, identity, is_url, open_backend, redact

__all__ = ["Backend", "Events", "Notifier", "exists", "identity", "is_url", "open_backend",
           "redact"]
