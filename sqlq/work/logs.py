"""Logging for ``sqlq work``: plain lines for people, ``--log-format json`` for collectors.

Workers log through the standard :mod:`logging` module (logger ``sqlq.worker`` and
friends), so an application that embeds a Worker keeps its own configuration; only
the ``sqlq work`` command calls :func:`configure`. Structured fields travel as the
record's ``extra`` (``job``, ``tube``, ``task``, ``outcome``, ``duration_ms`` ...) and
the JSON formatter writes them as keys. A failed run's traceback (a task's, or a
command's stderr tail) travels as ``traceback``: the JSON line's ``traceback`` key, and
in text the block below the line, as Python prints an exception's.
"""

from __future__ import annotations

import json
import logging
import sys
import time
from typing import Any

#: The ``extra`` keys that the JSON formatter copies into each line, in this order.
FIELDS = ("job", "tube", "task", "outcome", "attempt", "duration_ms", "delay", "reason",
          "pid", "exit", "traceback")


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time, level, logger, message and the structured fields."""

    def format(self, record: logging.LogRecord) -> str:
        """Render the record as one JSON line."""
        line: dict[str, Any] = {
            "time": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
                    + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "logger": record.name,
            "process": record.process,
            "message": record.getMessage(),
        }
        for key in FIELDS:
            if key in record.__dict__:
                line[key] = record.__dict__[key]
        if record.exc_info:
            line["traceback"] = self.formatException(record.exc_info)
        return json.dumps(line, default=str)


class TextFormatter(logging.Formatter):
    """``time LEVEL logger[pid]: message``, then the record's ``traceback`` field (a
    failed run's, kept from the worker's child or thread) as the traceback block that an
    exception logged here would show."""

    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)s %(name)s[%(process)d]: %(message)s")

    def format(self, record: logging.LogRecord) -> str:
        """The line, and the traceback block below it if the record carries one."""
        line = super().format(record)
        trace = record.__dict__.get("traceback")
        if trace and not record.exc_info:
            line += "\n" + str(trace)
        return line


def configure(level: str = "INFO", fmt: str = "text") -> None:
    """Send log records to stderr at ``level``, as text or JSON lines.

    The root logger is configured, not only ``sqlq``'s: ``sqlq work`` is the process's
    entry point, and the tasks' own log lines belong in the same stream and format.
    """
    handler = logging.StreamHandler(sys.stderr)
    if fmt == "json":
        handler.setFormatter(JsonFormatter())
    else:
        handler.setFormatter(TextFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
