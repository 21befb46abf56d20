"""Imported by each ``manage.py sqlq work`` worker process (``--import
sqlq.contrib.django.boot``): a worker is a fresh ``python -m sqlq`` process, so it
sets Django up (``DJANGO_SETTINGS_MODULE`` comes from the parent), which imports
every installed app's ``tasks.py``, before it reserves a job."""

from __future__ import annotations

import django
from django.apps import apps

if not apps.ready:
    django.setup()
