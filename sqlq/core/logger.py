"""sqlq's loggers, made on first use: importing ``logging`` costs a process milliseconds,
and most ``sqlq`` commands (a put in a shell loop) never log."""

from __future__ import annotations

TYPE_CHECKING = False  # not `typing`: sqlq-beanstalkd imports this before it listens
if TYPE_CHECKING:
    import logging


def logger(name: str = "sqlq") -> logging.Logger:
    """The logger ``name`` (the library's own, ``sqlq``, by default)."""
    import logging

    return logging.getLogger(name)
