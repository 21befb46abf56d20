"""The Django app: checks ``settings.SQLQ`` when Django starts, then imports every
installed app's ``tasks.py``, so that each task is declared before a request puts it
or a worker runs it."""

from __future__ import annotations

from django.apps import AppConfig
from django.utils.module_loading import autodiscover_modules


class SqlqConfig(AppConfig):  # type: ignore[misc]  # Django ships no types
    """``sqlq.contrib.django`` in ``INSTALLED_APPS``."""

    name = "sqlq.contrib.django"
    label = "sqlq"
    verbose_name = "sqlq"

    def ready(self) -> None:
        """A bad ``settings.SQLQ`` stops Django at start-up, in one line; tasks are found."""
        from . import conf
        from .queue import queue

        conf.read()  # checked now, but not kept: a test run renames the database later
        queue.reset()
        autodiscover_modules("tasks")
