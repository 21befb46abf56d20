"""``@q.task``: Python functions as jobs, with JSON arguments (never pickle).

A task is registered under a name (module-qualified by default) in one process-wide
registry, because the process that runs it is not the one that enqueued it: ``sqlq
work --import myapp.tasks`` imports the module, which decorates its functions again,
and the worker looks jobs' task names up here. A job's body is::

    {"task": "myapp.tasks.send_email", "args": ["a@example.com"], "kwargs": {"subject": "hi"}}

so any language (or ``sqlq put``) can enqueue a task. Arguments are checked against
the function's signature and for JSON when they are put, where the caller can still
fix them, not when a worker runs them hours later.

This is the task as its producers see it (the faces' ``@q.task``, ``task.put``,
workflows), below the Queue; the worker's side, which decodes a body, finds the
function and calls it, is ``work/taskrun.py``.
"""

from __future__ import annotations

import importlib
import inspect
import json
import os
import sys
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any, Generic, ParamSpec, Protocol, TypeVar

from ..model import DEFAULT_PRIORITY, DEFAULT_TTR, DEFAULT_TUBE, check_priority, check_tube
from ..putting import check_after, check_group, check_on_conflict
from .retry import DEFAULT_BACKOFF, DEFAULT_RETRIES, Backoff, RetryPolicy

if sys.version_info >= (3, 13):
    from typing import TypeVar as TypeVarWithDefault
else:  # a type parameter's default (PEP 696) before Python 3.13
    from typing_extensions import TypeVar as TypeVarWithDefault

if TYPE_CHECKING:
    from .periodic import Schedule

P = ParamSpec("P")
R = TypeVar("R")
#: What a task's ``put`` returns: its queue's ``put`` result. A job id (``int``, the
#: default: ``Task[P, R]``) for a :class:`sqlq.Queue`; ``int | None`` for the queues of
#: sqlq.contrib, whose put waits for the application's commit (no id yet) when the
#: queue is a separate database and a transaction is open.
Id = TypeVarWithDefault("Id", covariant=True, default=int)

#: Every task declared in this process, by name.
REGISTRY: dict[str, Task[Any, Any, Any]] = {}
#: The call shapes (argument count, keyword names) a task remembers the binding of.
BIND_SHAPES = 64


# -- the body: a JSON call ---------------------------------------------------------------------

def _type_name(value: object) -> str:
    return type(value).__name__


def encode_call(name: str, args: Sequence[Any], kwargs: dict[str, Any],
                signature: inspect.Signature | None = None) -> bytes:
    """The job body for calling task ``name``; TypeError names an argument JSON cannot carry."""
    try:
        return json.dumps({"task": name, "args": list(args), "kwargs": kwargs},
                          separators=(",", ":"), allow_nan=False).encode()
    except (TypeError, ValueError):
        pass
    # Find the culprit, by parameter name where the signature tells it.
    labelled: list[tuple[str, Any]] = []
    if signature is not None:
        bound = signature.bind(*args, **kwargs)
        labelled = [(f"argument {key!r}", value) for key, value in bound.arguments.items()]
    else:
        labelled = [(f"argument {i}", a) for i, a in enumerate(args)]
        labelled += [(f"argument {k!r}", v) for k, v in kwargs.items()]
    for label, value in labelled:
        try:
            json.dumps(value, allow_nan=False)
        except (TypeError, ValueError):
            raise TypeError(f"{name}: {label} ({_type_name(value)} {value!r:.60}) cannot be "
                            "sent as JSON; sqlq never pickles task arguments") from None
    raise TypeError(f"{name}: the arguments cannot be sent as JSON")


_DECODER = json.JSONDecoder()


def _loads(body: bytes) -> Any:
    """``json.loads(body)``, with a shortcut for what task bodies are (a worker decodes
    one per job): json.loads first works out the encoding of bytes, and a body that
    starts with ``{`` and a byte other than NUL is UTF-8 by its rules; then it skips
    whitespace around the value, and such a body has none before it. So it is
    decoded here directly and scanned from its first byte; only a body with more
    after the value (whitespace, or an error) goes the whole way, for the same
    result or error message."""
    if body[:1] == b"{" and body[1:2] not in (b"", b"\x00"):
        text = body.decode("utf-8", "surrogatepass")
        value, end = _DECODER.raw_decode(text)
        if end == len(text):
            return value
        return json.loads(text)
    return json.loads(body)


def decode_call(body: bytes) -> tuple[str, list[Any], dict[str, Any]]:
    """``(task name, args, kwargs)`` from a job body; ValueError says what is wrong."""
    try:
        call = _loads(body)
    except (ValueError, UnicodeDecodeError) as exc:
        raise ValueError(f"the body is not JSON ({exc})") from None
    if not isinstance(call, dict) or not isinstance(call.get("task"), str):
        raise ValueError('the body is not a task call: {"task": NAME, "args": [...], '
                         '"kwargs": {...}} expected')
    args, kwargs = call.get("args", []), call.get("kwargs", {})
    if not isinstance(args, list) or not isinstance(kwargs, dict):
        raise ValueError("the body's args must be a list and kwargs an object")
    return call["task"], args, kwargs


def default_name(fn: Callable[..., Any]) -> str:
    """``module.qualname``; a script run as ``__main__`` is named after its file, so that
    ``python app.py`` and ``sqlq work --import app`` agree on the names."""
    module = fn.__module__
    if module == "__main__":
        main = sys.modules.get("__main__")
        spec = getattr(main, "__spec__", None)
        if spec is not None and spec.name:
            module = spec.name
        elif isinstance(path := getattr(main, "__file__", None), str):
            module = os.path.splitext(os.path.basename(path))[0]
    return f"{module}.{fn.__qualname__}"


# -- the decorator's product -------------------------------------------------------------------

class Enqueuer(Protocol[Id]):
    """What a task puts its calls into: a :class:`sqlq.Queue`, or a framework's queue of
    sqlq.contrib (whose ``put`` returns None for a put deferred to a commit)."""

    @property
    def path(self) -> str:
        """The database: a file path or a ``postgresql://`` URL."""

    def put(self, body: bytes | str, *, tube: str = ..., priority: int = ...,
            delay: float = ..., ttr: float = ..., unique_key: str | None = ...,
            on_conflict: str = ...) -> Id:
        """Put a job."""


def _check_timeout(timeout: object) -> float | None:
    """A task's execution timeout: None, or seconds above 0."""
    if timeout is None:
        return None
    if isinstance(timeout, bool) or not isinstance(timeout, int | float):
        raise TypeError(f"timeout must be a number of seconds or None, not {_type_name(timeout)}")
    if not 0 < timeout < float("inf"):
        raise ValueError(f"timeout must be > 0 seconds, not {timeout!r}")
    return float(timeout)


class Task(Generic[P, R, Id]):
    """A function that can also be enqueued: ``fn(...)`` runs it here, ``fn.put(...)`` there.

    Made by ``@q.task``; see :meth:`sqlq.Queue.task` for the options. ``Task[P, R]`` is
    a task of a :class:`sqlq.Queue`, whose ``put`` returns the job's id; a task of
    sqlq.contrib's is a ``Task[P, R, int | None]``.
    """

    def __init__(self, queue: Enqueuer[Id], fn: Callable[P, R], *, name: str | None = None,
                 tube: str = DEFAULT_TUBE, priority: int = DEFAULT_PRIORITY,
                 ttr: float = DEFAULT_TTR, retries: int = DEFAULT_RETRIES,
                 backoff: Backoff = DEFAULT_BACKOFF, keepalive: bool = False,
                 timeout: float | None = None, schedule: Schedule | None = None) -> None:
        if not callable(fn):
            raise TypeError(f"@task decorates a function, not {_type_name(fn)}")
        if name is not None and (not isinstance(name, str) or not name):
            raise TypeError(f"name must be a non-empty str, not {name!r}")
        self.queue = queue
        self.fn = fn
        self.name = name or default_name(fn)
        self.tube = check_tube(tube)
        self.priority = check_priority(priority)
        self.ttr = ttr
        self.policy = RetryPolicy(retries, backoff)
        self.keepalive = bool(keepalive)
        #: Seconds a run may take, whatever its heartbeat keeps alive (None: no bound).
        self.timeout = _check_timeout(timeout)
        self.schedule = schedule
        try:
            self.signature: inspect.Signature | None = inspect.signature(fn)
        except (TypeError, ValueError):  # some builtins have none
            self.signature = None
        self.is_async = inspect.iscoroutinefunction(fn)
        #: bind_error's answers by call shape (see there).
        self._binds: dict[tuple[int, tuple[str, ...]], str | None] = {}
        self.__doc__ = fn.__doc__
        self.__name__ = getattr(fn, "__name__", self.name)
        self.__wrapped__ = fn
        REGISTRY[self.name] = self  # a re-import (reload) replaces the old entry

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> R:
        """Run the function here and now, as if it were not a task."""
        return self.fn(*args, **kwargs)

    def __repr__(self) -> str:
        return f"<sqlq.Task {self.name} tube={self.tube!r}>"

    def message(self, *args: Any, **kwargs: Any) -> bytes:
        """The job body that calls this task with these arguments (checked, JSON)."""
        error = self.bind_error(args, kwargs)
        if error is not None:
            raise TypeError(f"{self.name}: {error}")
        return encode_call(self.name, args, kwargs, self.signature)

    def bind_error(self, args: Sequence[Any], kwargs: dict[str, Any]) -> str | None:
        """Why a call with these arguments would not bind to the function, or None.

        Whether a call binds (and the error if not) depends only on its shape, the
        number of positional arguments and the keyword names in order, never on the
        values: the answer is kept per shape, so a worker pays for ``Signature.bind``
        once per shape, not once per job (a few shapes are kept, at most
        :data:`BIND_SHAPES`)."""
        if self.signature is None:
            return None
        shape = (len(args), tuple(kwargs))
        try:
            return self._binds[shape]
        except KeyError:
            pass
        try:
            self.signature.bind(*args, **kwargs)
            error = None
        except TypeError as exc:
            error = str(exc)
        if len(self._binds) < BIND_SHAPES:
            self._binds[shape] = error
        return error

    def put(self, *args: P.args, **kwargs: P.kwargs) -> Id:
        """Enqueue a call with these arguments (JSON); return the job's id (a task of
        sqlq.contrib's: None while the put waits for the application's commit)."""
        return self.queue.put(self.message(*args, **kwargs), tube=self.tube,
                              priority=self.priority, ttr=self.ttr)

    def options(self, *, delay: float = 0, priority: int | None = None,
                ttr: float | None = None, unique_key: str | None = None,
                tube: str | None = None, after: int | Iterable[int] | None = None,
                on_conflict: str = "keep", group: str | None = None) -> TaskOptions[P, Id]:
        """The same task with other put options for one call: ``.options(delay=30).put(...)``.

        ``after``: a job id or an iterable of ids the call waits for (see
        :meth:`sqlq.Queue.put`); ``delay`` then counts from the moment the last of
        them is gone. ``on_conflict="replace"`` with ``unique_key``: debounce, and
        ``group``: the call's group, as :meth:`sqlq.Queue.put`. These need the task's queue
        to be a :class:`sqlq.Queue`.
        """
        check_on_conflict(on_conflict, unique_key, after)
        return TaskOptions(self, delay=delay, unique_key=unique_key, on_conflict=on_conflict,
                           priority=self.priority if priority is None else priority,
                           ttr=self.ttr if ttr is None else ttr,
                           tube=self.tube if tube is None else tube, after=check_after(after),
                           group=check_group(group))

    def s(self, *args: P.args, **kwargs: P.kwargs) -> Signature:
        """This call, not put yet: a step of :func:`sqlq.chain` or :func:`sqlq.chord`
        (the name Celery's users know). ``task.options(...).s(...)`` keeps the options."""
        return self.options().s(*args, **kwargs)


class TaskOptions(Generic[P, Id]):
    """A task with put options bound, made by :meth:`Task.options`."""

    def __init__(self, task: Task[P, Any, Id], *, delay: float, priority: int, ttr: float,
                 unique_key: str | None, tube: str, after: tuple[int, ...] = (),
                 on_conflict: str = "keep", group: str | None = None) -> None:
        self.task = task
        self.delay, self.priority, self.ttr = delay, priority, ttr
        self.unique_key, self.tube, self.on_conflict = unique_key, tube, on_conflict
        #: The jobs the call waits for (checked ids, in order, each once).
        self.after = after
        #: The call's group (checked), or None.
        self.group = group

    def put(self, *args: P.args, **kwargs: P.kwargs) -> Id:
        """Enqueue a call with these arguments and the bound options; return the job id
        (as :meth:`Task.put`).

        Raises:
            JobNotFound: an id of ``after`` was never issued (nothing is put).
            TypeError: the arguments do not fit the function or JSON, or ``after`` is
                given to a task whose queue is not a :class:`sqlq.Queue`.
        """
        body = self.task.message(*args, **kwargs)
        queue = self.task.queue
        if not self.after and self.group is None:
            return queue.put(body, tube=self.tube, priority=self.priority, delay=self.delay,
                             ttr=self.ttr, unique_key=self.unique_key,
                             on_conflict=self.on_conflict)
        from ..facade.puts import Puts  # not at import: a worker imports tasks before the Queue

        if not isinstance(queue, Puts):
            raise TypeError(f"{self.task.name}: {'after' if self.after else 'group'}= needs "
                            f"a sqlq.Queue; {type(queue).__name__} puts without it")
        job_id: Id = queue.put(body, tube=self.tube, priority=self.priority, delay=self.delay,
                               ttr=self.ttr, unique_key=self.unique_key,
                               after=self.after or None, on_conflict=self.on_conflict,
                               group=self.group)
        return job_id

    def s(self, *args: P.args, **kwargs: P.kwargs) -> Signature:
        """This call with these options, not put yet (see :meth:`Task.s`)."""
        return Signature(self, args, kwargs)


class Signature:
    """A task call with its put options, not put yet: what :meth:`Task.s` makes.

    The steps of :func:`sqlq.chain` and :func:`sqlq.chord` are these, so that a
    workflow is written as the calls it makes (``resize.s("a.jpg")``), each step
    with its own task's tube, priority and TTR, and checked as one would be put:
    arguments that do not fit the function or JSON fail before anything is put.
    """

    __slots__ = ("args", "kwargs", "options")

    def __init__(self, options: TaskOptions[Any, Any], args: tuple[Any, ...],
                 kwargs: dict[str, Any]) -> None:
        self.options = options
        self.args = args
        self.kwargs = kwargs

    @property
    def task(self) -> Task[Any, Any, Any]:
        return self.options.task

    def __repr__(self) -> str:
        call = [repr(a) for a in self.args] + [f"{k}={v!r}" for k, v in self.kwargs.items()]
        return f"{self.task.name}.s({', '.join(call)})"

    def message(self, *first: Any) -> bytes:
        """The job body: this call, with ``first`` before its own arguments (a chord's
        final step gets its parents' ids so)."""
        return self.task.message(*first, *self.args, **self.kwargs)


def import_modules(names: Sequence[str]) -> None:
    """Import the modules that declare tasks (``--import``), from the current directory too."""
    cwd = os.getcwd()
    if cwd not in sys.path and "" not in sys.path:
        sys.path.insert(0, cwd)  # as `python -m` would: `sqlq` is a script in .venv/bin
    for name in names:
        importlib.import_module(name)


def decorator(queue: Enqueuer[Id], fn: Callable[P, R] | None, *,
              periodic: Schedule | None = None, **options: Any
              ) -> Task[P, R, Id] | Callable[[Callable[P, R]], Task[P, R, Id]]:
    """What ``Queue.task`` and ``Queue.periodic`` return: a Task, or a decorator making one."""

    def make(f: Callable[P, R]) -> Task[P, R, Id]:
        task = Task(queue, f, schedule=periodic, **options)
        if periodic is not None and task.signature is not None:
            try:
                task.signature.bind()
            except TypeError:
                raise TypeError(f"periodic task {task.name} must take no arguments: "
                                "it is called with none") from None
        return task

    return make if fn is None else make(fn)
