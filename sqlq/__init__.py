"""sqlq: a durable job queue in one SQLite file, with beanstalkd semantics.

    import sqlq
    with sqlq.Queue("app.db") as q:
        q.put(b"hello", tube="emails")
        job = q.reserve(tubes=["emails"], timeout=5)
        job.delete()
"""

from __future__ import annotations

from .errors import (
    DatabaseError,
    Disconnected,
    Error,
    InvalidTube,
    JobBuried,
    JobCancelled,
    JobLost,
    JobNotFound,
    JobTooBig,
    Locked,
    SchemaError,
    Timeout,
)
from .version import __version__

TYPE_CHECKING = False  # not `typing`: see __getattr__
if TYPE_CHECKING:
    from typing import Any

    from .asynchandles import AsyncJob
    from .asyncq import AsyncQueue
    from .attempts import Attempt
    from .control import current_job
    from .enqueue import put, put_many
    from .facade.puts import Transaction
    from .facade.reads import Links
    from .model import Job
    from .queue import Queue
    from .tasks.task import Signature
    from .workflows import chain, chord

_LAZY = {"AsyncJob": ".asynchandles", "AsyncQueue": ".asyncq", "Attempt": ".attempts",
         "Job": ".model", "Links": ".facade.reads", "Queue": ".queue", "Signature": ".tasks.task",
         "Transaction": ".facade.puts", "chain": ".workflows", "chord": ".workflows",
         "current_job": ".control", "put": ".enqueue", "put_many": ".enqueue"}


def __getattr__(name: str) -> Any:
    """Import the Queue on first use, not with the package: ``sqlq-beanstalkd``
    must listen within 100 ms of exec (beanstalkd clients connect that soon),
    which leaves no time for the queue's dependencies before it binds."""
    if name in _LAZY:
        import importlib

        value = getattr(importlib.import_module(_LAZY[name], __name__), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

__all__ = [
    "AsyncJob",
    "AsyncQueue",
    "Attempt",
    "DatabaseError",
    "Disconnected",
    "Error",
    "InvalidTube",
    "Job",
    "JobBuried",
    "JobCancelled",
    "JobLost",
    "JobNotFound",
    "JobTooBig",
    "Links",
    "Locked",
    "Queue",
    "SchemaError",
    "Signature",
    "Timeout",
    "Transaction",
    "chain",
    "chord",
    "current_job",
    "put",
    "put_many",
    "__version__",
]
