"""Storage backends behind one contract (``base.py``): a folder per backend.

* ``sqlite/``: one SQLite file (the default: a path);
* ``postgres/``: a PostgreSQL database (a ``postgresql://`` URL).

Nothing outside this package imports a backend's modules: the Queue asks
:func:`open_backend` for one and speaks to it through :class:`Backend`;
``sqlq.put(conn)`` asks :func:`for_connection` for the one that serves an
application's own connection (``registry.py`` names the backends, ``locations.py``
reads a location without opening it).
"""

from .base import Backend, Events, Notifier
from .locations import exists, identity, is_url, redact
from .registry import companions, for_connection, open_backend

__all__ = ["Backend", "Events", "Notifier", "companions", "exists", "for_connection",
           "identity", "is_url", "open_backend", "redact"]
