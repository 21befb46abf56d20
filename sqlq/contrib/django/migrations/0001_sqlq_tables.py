"""``manage.py migrate`` creates sqlq's tables in the Django database the queue shares
(``settings.SQLQ = {"DATABASE": alias}``), through sqlq's own migrations: a Queue
opened with ``init=True``. Non-atomic, so that Django holds no transaction on the
database while sqlq's connection writes to it. Later sqlq versions migrate their
tables themselves when a Queue opens the database."""

from __future__ import annotations

from typing import Any

from django.db import migrations


def create_sqlq_tables(apps: Any, schema_editor: Any) -> None:
    from sqlq.contrib.django import conf
    from sqlq.queue import Queue

    config = conf.read()
    if config.alias == schema_editor.connection.alias:
        queue = Queue(config.location, **config.queue_kwargs)
        try:
            queue.backend.connect()  # now: a server Queue made while unreachable waits
        finally:
            queue.close()


class Migration(migrations.Migration):  # type: ignore[misc]  # Django ships no types
    atomic = False
    dependencies: list[tuple[str, str]] = []
    operations = [migrations.RunPython(create_sqlq_tables, migrations.RunPython.noop,
                                       elidable=False)]
