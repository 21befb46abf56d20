"""sqlq as a Django app: ``INSTALLED_APPS += ["sqlq.contrib.django"]``.

* ``settings.SQLQ`` says where the queue lives: Django's own database
  (``{"DATABASE": "default"}``, the default) or one of its own (``{"DB": path or
  URL}``); see :mod:`.conf`.
* ``from sqlq.contrib.django import task`` declares tasks in an app's ``tasks.py``
  without opening anything at import; every installed app's ``tasks.py`` is
  imported when Django starts, and by ``manage.py sqlq work``.
* ``f.put(...)`` inside ``transaction.atomic()`` commits with the request, or waits
  for its commit; a rolled-back request never enqueues (see :mod:`.queue`).
* ``python manage.py sqlq ...`` is the ``sqlq`` command on the configured queue:
  ``work``, ``top``, ``stats``, ``dashboard``, ``peek --buried``...
* ``path("admin/sqlq/", include("sqlq.contrib.django.urls"))``: a read-only page of
  tubes and buried jobs for staff.
"""

from __future__ import annotations

from .queue import DjangoQueue, periodic, queue, task

__all__ = ["DjangoQueue", "periodic", "queue", "task"]
