"""The dispatcher: what every verb shares, applied once.

A verb (``verbs/contract.py``, and the claims of ``engine.py``) names its storage call
and its :class:`Verb` record; :meth:`Dispatcher.run` does the rest, the same way for
all of them, as Oban's engine runs every callback through one ``with_span``:

* **the transaction** the record asks for: a read, a write (durable or not, one
  statement or several), or a durable write whose commit other threads' writes may
  share (group commit, ``backends/group.py``); the time (ms) is read inside it;
* **the span**, when OpenTelemetry is set up (:mod:`sqlq.core.tracing`): ``send`` for puts,
  ``receive`` for claims, ``settle`` for acknowledgements, following the messaging
  conventions (``process`` for a worker's run: ``Operations.processing``, on the same
  test, :func:`traced`); a put's trace context is stored with its jobs. Without a tracer it
  costs one attribute read (and, with the API installed, a clock read);
* **the lost-connection rule**: an acknowledgement (``Verb.ack``) cut off by a lost
  connection may have committed, so it runs once more on a new connection, and if
  the job is gone by then, its JobLost (``cut_off`` true) or JobNotFound says that the
  first attempt may have been what removed it; a batch's lost leases, returned rather
  than raised (the other deletes stand), come back as :class:`CutOff` for its caller
  to say the same. Anything else raises :class:`~sqlq.Disconnected`: a put
  is never repeated (it could put twice); a claim's caller waits through the outage
  (``waiting.py``). The backend itself runs a read, or a transaction lost before its
  COMMIT, once more (``backends/postgres/db.py``): those cannot have committed. A
  holder's touch or release waits for a lost server no longer than its lease
  (:meth:`within`).
"""

from __future__ import annotations

import copy
import sys
import time
from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING, Any, NamedTuple

from ..core import tracing
from ..errors import Disconnected, JobLost, JobNotFound

if TYPE_CHECKING:
    from ..backends import Backend
    from ..backends.base import Conn
    from ..backends.group import Batch

#: Operation types of the messaging conventions (a verb's span), or None: no span.
SEND, RECEIVE, SETTLE = "send", "receive", "settle"
#: How a verb's storage call runs: a read, a write, a write sharing its commit.
READ, WRITE, SHARED = 0, 1, 2
#: What a verb's commit may give waiters (``Verb.wakes``): READIES, something to claim
#: (a job made ready, a result made final, a tube unpaused, a cap raised): waiters look;
#: FREES, a held job's end, which frees a slot of its tube's cap: waiters a cap held back
#: look. A face whose own process has waiters (AsyncQueue's, ``sqlq serve``'s) has them
#: look at once; others hear the commit (the notifier), later.
READIES, FREES = 1, 2

_modules = sys.modules
_OTEL = "opentelemetry.trace"
#: What a JobLost or JobNotFound of an acknowledgement made once more adds.
CUT_OFF = " (or by this call's first attempt, cut off by a lost connection)"


class CutOff(list[tuple[int, int]]):
    """The (id, lease) pairs a batch acknowledgement (``Verb.lost``) made once more
    found lost: its first attempt may have removed those jobs."""

    __slots__ = ()


class Verb(NamedTuple):
    """What the dispatcher needs to know of a verb, besides its storage call."""

    #: The verb's name (``messaging.operation.name`` of its span).
    name: str
    #: Its span's operation type: SEND, RECEIVE, SETTLE; None for no span (a read, an
    #: operator's change).
    op: str | None = None
    #: READ, WRITE or SHARED (durable, its commit shared with other threads' writes).
    tx: int = WRITE
    #: A write whose loss on power failure loses nothing (a claim, a touch: the job
    #: simply comes back) commits without a flush.
    durable: bool = True
    #: One statement: a backend may run it as its own autocommit transaction.
    single: bool = False
    #: An acknowledgement, run once more after a lost connection (see the module).
    ack: bool = False
    #: Whether the storage call takes the time (ms) after the connection.
    timed: bool = True
    #: Whether it has a span: not the engine's own looks, which a waiter makes on every
    #: wake (is anything ready, when is something due).
    span: bool = True
    #: Its value is the (id, lease) pairs it found lost (a batch's: the other deletes
    #: stand, so they are not raised); made once more, they come back as CutOff.
    lost: bool = False
    #: What its commit may give waiters: READIES, FREES, or 0 (see READIES).
    wakes: int = 0


def traced() -> bool:
    """Whether verbs and runs get spans now: the one test (``run``, ``run_batched``, and
    ``Operations.processing`` for a worker's run). No tracer without the API imported (or
    named by the environment): a dict probe first, not tracing.active()'s call and clock
    read, on every verb."""
    return tracing.INSTALLED and (_OTEL in _modules or tracing.BY_ENVIRONMENT) \
        and tracing.active()


class Dispatcher:
    """Runs verbs on one backend (one per Queue; see the module docstring)."""

    __slots__ = ("backend", "clock", "_read", "_write", "_shared")

    def __init__(self, backend: Backend, clock: Callable[[], int]) -> None:
        self.backend = backend
        self.clock = clock
        self._read, self._write, self._shared = backend.runners()

    def run(self, verb: Verb, fn: Callable[..., Any], *args: Any,
            tube: str | None = None) -> Any:
        """``fn(conn, now, *args)`` (``fn(conn, *args)`` for a verb that is not timed) in
        ``verb``'s transaction, span and lost-connection rule; its value. ``tube``: the
        job's, when the caller knows it, for the span's name (SQLite's worker's delete
        returns no tube: RETURNING costs every delete, traced or not)."""
        if verb.span and traced():
            return tracing.operation(verb, args, self._call, fn, tube)
        return self._call(verb, fn, args)

    def within(self, lease_end: int) -> Dispatcher:
        """This dispatcher, for a call under a lease that ends at ``lease_end`` (ms, the
        clock's), after which the call would be refused anyway: its WRITE verbs wait for
        a lost server no longer (``Backend.write_until``): a worker's heartbeat touch
        must not hold up the rest of its watch (stop requests, cancels, timeouts) for
        the minutes a reconnect may wait. A copy made per call: the other verbs' path is
        left as it is."""
        bounded = copy.copy(self)
        give_up_at = time.monotonic() + max(lease_end - self.clock(), 0) / 1000
        bounded._write = partial(self.backend.write_until, give_up_at)
        return bounded

    def run_batched(self, verb: Verb, batch: Batch, fn: Callable[..., Any],
                    *args: Any) -> Any:
        """:meth:`run` for a SHARED write that may run together with others of its kind,
        ``batch`` (the puts of several threads in one statement): its item is ``args``."""
        if verb.span and traced():  # the trace goes in with each job: no batch
            return tracing.operation(verb, args, self._call, fn)
        return self._call(verb, fn, args, batch)

    def _call(self, verb: Verb, fn: Callable[..., Any], args: tuple[Any, ...],
              batch: Batch | None = None) -> Any:
        clock = self.clock
        if verb.timed:
            def call(conn: Conn) -> Any:
                return fn(conn, clock(), *args)
        else:
            def call(conn: Conn) -> Any:
                return fn(conn, *args)
        tx = verb.tx
        try:
            if tx == SHARED:
                return self._shared(call, verb.single, batch, args)
            if tx == WRITE:
                return self._write(call, durable=verb.durable, single=verb.single)
            return self._read(call, single=verb.single)
        except Disconnected:
            if not verb.ack:
                raise
        # Once more: the acknowledgement may have committed before the cut.
        try:
            if tx == SHARED:
                value = self._shared(call, verb.single)
            else:
                value = self._write(call, durable=verb.durable, single=verb.single)
        except JobLost as e:
            raise type(e)(f"{e}{CUT_OFF}", job_ids=e.job_ids, cut_off=True) from None
        except JobNotFound as e:
            raise JobNotFound(f"{e}{CUT_OFF}") from None
        return CutOff(value) if verb.lost and value else value


class OnConnection(Dispatcher):
    """The dispatcher of ``sqlq.put(conn)``: verbs run in the application's own
    transaction on its connection (``run(conn, write)`` of its driver), never committed
    by sqlq and never run twice."""

    __slots__ = ()

    def __init__(self, on: Callable[[Callable[[Conn], Any]], Any],
                 clock: Callable[[], int]) -> None:
        def run(call: Callable[[Conn], Any], *_: Any, **__: Any) -> Any:
            return on(call)

        self.backend = None  # type: ignore[assignment]  # the application's connection
        self.clock = clock
        self._read = self._write = self._shared = run
