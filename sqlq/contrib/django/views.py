"""A read-only page for staff: every tube's counts and each tube's buried jobs.

Mount it beside the admin (it needs ``django.contrib.admin`` and ``auth``)::

    path("admin/sqlq/", include("sqlq.contrib.django.urls")),

It only reads. To kick, delete or pause, run ``python manage.py sqlq dashboard``
(the full dashboard, with actions behind a token) or the CLI.
"""

from __future__ import annotations

from typing import Any

from django.contrib.admin.views.decorators import staff_member_required
from django.shortcuts import render

from ...core.display import display_text  # the CLI's escaping of bodies, shared
from .queue import queue

#: Buried jobs shown per tube (the oldest first).
BURIED_SHOWN = 50


def _buried(tube: str) -> list[dict[str, Any]]:
    return [{"id": s.id, "reason": s.job.bury_reason or "", "buries": s.job.buries,
             "body": display_text(s.job.body[:200])}
            for s in queue.views.job_page(tube, "buried", limit=BURIED_SHOWN)]


@staff_member_required  # type: ignore[untyped-decorator]  # Django ships no types
def overview(request: Any) -> Any:
    """Tubes (ready, reserved, delayed, buried, waiting) and the buried jobs of each."""
    snapshot = queue.views.overview()
    tubes = [{"summary": t, "buried_jobs": _buried(t.name) if t.buried else []}
             for t in snapshot.tubes]
    return render(request, "sqlq/overview.html", {
        "title": "sqlq: tubes and buried jobs", "tubes": tubes,
        "location": queue.config.child_location(), "puts_total": snapshot.puts_total})
