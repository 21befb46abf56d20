"""sqlq for Flask: the ``Sqlq`` extension, tasks declared before the app exists, the
``flask sqlq …`` commands, and puts that join Flask-SQLAlchemy's transaction.

    db = SQLAlchemy()
    jobs = Sqlq()                      # no app yet: tasks can be declared at import

    @jobs.task(tube="emails")
    def send_welcome(user_id: int) -> None: ...

    def create_app() -> Flask:
        app = Flask(__name__)
        app.config["SQLALCHEMY_DATABASE_URI"] = "sqlite:///app.db"   # SQLQ_DB: elsewhere
        db.init_app(app)
        jobs.init_app(app)
        return app

Why the pieces are shaped so:

* **One Queue per app and process**, opened on first use, never before: a pre-fork
  server (gunicorn, uWSGI) imports the app in its master and forks workers, and a
  Queue's connections, file locks and notifier must not cross ``fork()``. A process
  that finds it was forked leaves the parent's Queue alone (closing it there would
  close the parent's database session) and opens its own. Queues close at exit.
* **Tasks are bound to the extension, not to a Queue**: ``task.put()`` goes to the
  current app's queue through :meth:`Sqlq.put`, so it joins the request's
  transaction (see ``_session.py``); a worker runs each task inside an app context
  of its own, as Flask runs each request, so ``db.session`` works in tasks.
* **One SQLite library per process**: when the queue is the app's own SQLite file,
  its Queue goes through Python's ``sqlite3`` like SQLAlchemy does, and
  ``SQLQ_SQLITE_DRIVER=sqlite3`` becomes the process's default (inherited by
  ``sqlq work``'s processes), since a task's ``db.session`` opens the file there too.
"""

from __future__ import annotations

import atexit
import functools
import inspect
import os
import threading
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, ParamSpec, TypeVar, cast, overload

from flask import Flask, current_app, g, has_app_context

from ...enqueue import dbapi_connection
from ...errors import Error
from ...model import DEFAULT_MAX_JOB_SIZE, DEFAULT_PRIORITY, DEFAULT_TTR, DEFAULT_TUBE
from ...queue import Queue
from .. import _shared as shared
from ._cli import COMMAND_CONTEXT, make_command
from ._database import Settings, resolve
from ._session import defer, session_in_transaction

if TYPE_CHECKING:
    from sqlalchemy.orm import Session

    from ...tasks.task import Task

F = TypeVar("F", bound=Callable[..., Any])
P = ParamSpec("P")
R = TypeVar("R")
#: The environment variable that sets the default SQLite library of every Queue
#: (docs/faq.md: "One SQLite library per process").
DRIVER_ENV = "SQLQ_SQLITE_DRIVER"


class Sqlq:
    """The Flask extension: ``Sqlq(app)``, or ``Sqlq()`` then :meth:`init_app`.

    Config keys: ``SQLQ_DB``, the queue's file or ``postgresql://`` URL (unset: the
    database of ``SQLALCHEMY_DATABASE_URI``), and ``SQLQ_OPTIONS``, keywords for
    ``sqlq.Queue`` (``{"durability": "normal"}``).
    """

    def __init__(self, app: Flask | None = None) -> None:
        self._apps: list[Flask] = []
        self._settings: dict[int, Settings] = {}
        self._queues: dict[int, Queue] = {}  # this process's, by id(app)
        self._pid = os.getpid()
        self._forked_away: list[Queue] = []  # a parent's: never used, never closed
        self._lock = threading.RLock()
        #: What the extension's tasks hold as their ``queue`` (see :class:`_AppQueue`).
        self.tasks_queue = _AppQueue(self)
        atexit.register(self.close)
        if app is not None:
            self.init_app(app)

    def init_app(self, app: Flask) -> None:
        """Bind the extension to an app: its config, ``flask sqlq``, its queue."""
        app.extensions["sqlq"] = self
        self._apps.append(app)
        app.cli.add_command(make_command(self))
        app.before_request(self._before_request)

    # -- the app, its settings, its queue ----------------------------------------------------

    @property
    def app(self) -> Flask:
        """The current app, or outside an app context the only app bound (in a worker
        process that only imported the tasks, the app ``$FLASK_APP`` names)."""
        if has_app_context() and current_app.extensions.get("sqlq") is self:
            return cast(Flask, current_app._get_current_object())  # type: ignore[attr-defined]
        if not self._apps:
            _load_flask_app()
        if len(self._apps) == 1:
            return self._apps[0]
        if not self._apps:
            raise Error("no Flask app uses this sqlq extension: call init_app(app) first")
        raise Error(f"{len(self._apps)} Flask apps use this sqlq extension: use it inside "
                    "one's app context")

    def settings(self, app: Flask | None = None) -> Settings:
        """Where the app's queue lives and whether it shares the app's database."""
        app = app or self.app
        with self._lock:
            settings = self._settings.get(id(app))
            if settings is None:
                db = app.extensions.get("sqlalchemy")
                engine = None
                if db is not None:
                    with app.app_context():
                        engine = db.engine
                settings = self._settings[id(app)] = resolve(app.config, engine)
                if settings.shared and settings.sqlite_file:
                    os.environ.setdefault(DRIVER_ENV, "sqlite3")
        return settings

    @property
    def location(self) -> str:
        """The queue's file path or URL (as configured, password included)."""
        return self.settings().location

    @property
    def queue(self) -> Queue:
        """This process's Queue of the current app, opened on first use."""
        return self.queue_of(self.app)

    def queue_of(self, app: Flask) -> Queue:
        """This process's Queue of ``app``, opened on first use."""
        with self._lock:
            self._left_behind_by_fork()
            queue = self._queues.get(id(app))
            if queue is None:
                settings = self.settings(app)
                options = dict(settings.options)
                if settings.shared:
                    options.setdefault("init", True)  # the app's database: add sqlq's tables
                    if settings.sqlite_file:
                        options.setdefault("driver", "sqlite3")
                queue = self._queues[id(app)] = Queue(settings.location, **options)
        return queue

    def _left_behind_by_fork(self) -> None:
        if self._pid != os.getpid():
            self._forked_away.extend(self._queues.values())
            self._queues.clear()
            self._pid = os.getpid()

    def close(self) -> None:
        """Close this process's Queues (at exit by itself; a parent's are left alone)."""
        with self._lock:
            self._left_behind_by_fork()
            queues, self._queues = list(self._queues.values()), {}
        for queue in queues:
            queue.close()

    def _before_request(self) -> None:
        # On the app's own SQLite file, open the Queue (and add sqlq's tables) before the
        # request's session can hold the write lock that a first open would wait for.
        settings = self.settings()
        if settings.shared and settings.sqlite_file:
            self.queue  # noqa: B018 - opened for its side effect

    # -- puts that follow the request's transaction -------------------------------------------

    def put(self, body: bytes | str, *, tube: str = DEFAULT_TUBE,
            priority: int = DEFAULT_PRIORITY, delay: float = 0, ttr: float = DEFAULT_TTR,
            unique_key: str | None = None, after: int | Iterable[int] | None = None,
            on_conflict: str = "keep") -> int | None:
        """``Queue.put`` that follows Flask-SQLAlchemy's session (``after``: the jobs
        this one waits for, as in ``Queue.put``).

        Outside a session transaction the job is put at once. Inside one, on the app's
        own database, it joins the transaction (commits or rolls back with the rows);
        on a separate queue it is put when the session commits, never if it rolls
        back, and this returns None (the id does not exist yet).

        Returns:
            The job's id, or None for a put deferred to the commit.
        """
        app = self.app
        settings = self.settings(app)
        session = session_in_transaction(app.extensions) if has_app_context() else None
        conn = None
        if session is not None and settings.shared:
            self.queue_of(app)  # sqlq's tables, before the session's connection holds a lock
            conn = dbapi_connection(session)
        return shared.put(
            lambda: self.queue_of(app), body,
            max_job_size=settings.options.get("max_job_size", DEFAULT_MAX_JOB_SIZE),
            conn=conn, in_transaction=session is not None,
            on_commit=lambda fn: defer(cast("Session", session), self.queue_of(app), fn),
            tube=tube, priority=priority, delay=delay, ttr=ttr, unique_key=unique_key,
            after=after, on_conflict=on_conflict)

    # -- tasks -----------------------------------------------------------------------------

    @overload
    def task(self, fn: Callable[P, R], /) -> Task[P, R, int | None]: ...

    @overload
    def task(self, fn: None = None, /, **options: Any
             ) -> Callable[[Callable[P, R]], Task[P, R, int | None]]: ...

    def task(self, fn: Callable[..., Any] | None = None, /, **options: Any) -> Any:
        """``@jobs.task``: ``Queue.task``'s decorator, usable before the app exists.

        ``f.put(...)`` goes through :meth:`put` (so it follows the request's
        transaction, and returns None while it waits for the commit); a worker runs
        ``f`` in an app context of its own.
        Options are ``Queue.task``'s (``tube``, ``retries``, ``ttr``, ...).
        """
        return self._decorate(fn, options)

    @overload
    def periodic(self, fn: Callable[[], R], /) -> Task[[], R, int | None]: ...

    @overload
    def periodic(self, fn: None = None, /, **options: Any
                 ) -> Callable[[Callable[[], R]], Task[[], R, int | None]]: ...

    def periodic(self, fn: Callable[..., Any] | None = None, /, *, every: float | None = None,
                 cron: str | None = None, **options: Any) -> Any:
        """``@jobs.periodic(every=300)``: ``Queue.periodic``, before the app exists."""
        from ...tasks.periodic import Schedule

        return self._decorate(fn, options, Schedule(every, cron))

    def _decorate(self, fn: Callable[..., Any] | None, options: dict[str, Any],
                  schedule: Any = None) -> Any:
        from ...tasks.task import decorator

        def make(f: Callable[..., Any]) -> Task[Any, Any, int | None]:
            made = decorator(self.tasks_queue, _in_app_context(self, f), periodic=schedule,
                             **options)
            return cast("Task[Any, Any, int | None]", made)

        return make if fn is None else make(fn)


class _AppQueue:
    """What the extension's tasks hold as their ``queue``: puts go through
    :meth:`Sqlq.put`; anything else (``result``, ``stats``...) to the current Queue."""

    def __init__(self, ext: Sqlq) -> None:
        self._ext = ext

    @property
    def path(self) -> str:
        return self._ext.location

    def put(self, body: bytes | str, **options: Any) -> int | None:
        return self._ext.put(body, **options)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._ext.queue, name)


def _caller_context() -> bool:
    """True if the call runs in the caller's app context (a request, a shell), False if
    the task needs one of its own (a worker's job)."""
    return has_app_context() and not g.get(COMMAND_CONTEXT, False)


def _in_app_context(ext: Sqlq, fn: F) -> F:
    """fn, run in the caller's app context if there is one, else in a new one (a worker:
    one per job, as Flask does per request, so its ``db.session`` ends with the job)."""
    if inspect.iscoroutinefunction(fn):
        @functools.wraps(fn)
        async def run_async(*args: Any, **kwargs: Any) -> Any:
            if _caller_context():
                return await fn(*args, **kwargs)
            with ext.app.app_context():
                return await fn(*args, **kwargs)

        return cast(F, run_async)

    @functools.wraps(fn)
    def run(*args: Any, **kwargs: Any) -> Any:
        if _caller_context():
            return fn(*args, **kwargs)
        with ext.app.app_context():
            return fn(*args, **kwargs)

    return cast(F, run)


def _load_flask_app() -> None:
    """Create the app as ``flask`` would ($FLASK_APP, else wsgi.py or app.py here), in a
    process that imported the tasks only (``sqlq work``'s processes); its factory binds
    the extension."""
    from flask.cli import NoAppException, ScriptInfo

    try:
        ScriptInfo(app_import_path=os.environ.get("FLASK_APP")).load_app()
    except NoAppException as exc:
        raise Error(f"no Flask app to run these tasks in: set FLASK_APP ({exc})") from None


__all__ = ["Sqlq"]
