"""sqlq: a durable job queue in one SQLite file, with beanstalkd semantics.

    import sqlq
    with sqlq.Queue("app.db") as q:
        q.put(b"hello", tube="emails")
        job = q.reserve(tubes=["emails"], timeout=5)
        job.delete()
"""

from __future__ import annotations

__version__ = "0.1.0"

from .errors import (
    DatabaseError,
    Error,
    InvalidTube,
    JobBuried,
    JobLost,
    JobNotFound,
    JobTooBig,
    SchemaError,
    Timeout,
)
from .model import Job
from .queue import Queue, Transaction

__all__ = [
    "DatabaseError",
    "Error",
    "InvalidTube",
    "Job",
    "JobBuried",
    "JobLost",
    "JobNotFound",
    "JobTooBig",
    "Queue",
    "SchemaError",
    "Timeout",
    "Transaction",
    "__version__",
]
