"""``sqlq dashboard``: see and steer the queue from a browser; ``/metrics`` for Prometheus.

Modules, one job each: ``app`` (the HTTP server), ``routes`` (pages and actions),
``views`` (templates and how values become text), ``security`` (who may see and act),
``metrics`` (the Prometheus text), ``live`` (the rates chart). It talks to the queue
only through the ``Queue``'s public methods, so it works on any storage behind it.
Needs the ``dashboard`` extra (Jinja2, prometheus-client): see :mod:`sqlq.core.extras`.
"""

from __future__ import annotations

from sqlq.core.extras import install_hint
from sqlq.errors import Error

try:
    import jinja2  # noqa: F401
except ImportError:  # pragma: no cover - the extra is not installed
    raise Error(f"the dashboard needs its extra: {install_hint('dashboard')}") from None

from .app import DashboardServer, serve

__all__ = ["DashboardServer", "serve"]
