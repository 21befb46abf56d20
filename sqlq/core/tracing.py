"""OpenTelemetry spans of what sqlq puts and runs, and the trace a job carries between.

With ``opentelemetry-api`` installed (the ``otel`` extra: :mod:`sqlq.core.extras`) and a tracer
provider configured (the SDK set up by the application, by ``opentelemetry-instrument``,
or in a module ``sqlq work --import`` loads), sqlq makes spans through the global
provider, following OpenTelemetry's messaging conventions:

* a PRODUCER span ``send TUBE`` around each put and put_many (``Queue``, a
  ``Transaction``, ``AsyncQueue``, ``sqlq.put(conn, ...)``), whose W3C context
  (``traceparent``, and ``tracestate``) is stored in the job's ``trace`` column, beside
  the body, in the put's transaction; and one ``send TOPIC`` around each ``publish``,
  its context stored on every copy;
* a CONSUMER span ``process TUBE`` around each run in ``sqlq work`` (tasks and commands,
  sync and async workers): a child of the producer's span, linked to the span of the
  job's previous failed run, ending with the job's outcome.

Every other module reaches OpenTelemetry only through this one, behind one test,
``tracing.INSTALLED and tracing.active()``: without the package nothing is imported and a
put pays one attribute read; with it but no provider configured (spans would be no-ops),
a put pays one clock read (:func:`active`) and writes nothing more, and nothing of it is
imported unless the application imported it. A put without a
recording span (no SDK, or not sampled) leaves ``trace`` NULL. See docs/tracing.md.
"""

from __future__ import annotations

import contextlib
import contextvars
import importlib.util
import os
import sys
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

if TYPE_CHECKING:
    from opentelemetry.context import Context
    from opentelemetry.trace import Span, SpanContext, Tracer

T = TypeVar("T")
V = TypeVar("V", bound="Operation")


class Processed(Protocol):
    """What a run's span reads of its reserved job (a :class:`sqlq.Job`; named here so
    that the ground floor imports nothing of the job model above it)."""

    id: int
    tube: str
    reserves: int
    priority: int
    body: bytes
    trace: str | None
    state: str


def _installed() -> bool:
    try:
        return importlib.util.find_spec("opentelemetry.trace") is not None
    except ModuleNotFoundError:  # no "opentelemetry" package at all
        return False


#: Whether ``opentelemetry-api`` is installed (looked up once, nothing imported).
INSTALLED = _installed()

#: The messaging conventions' attributes (semantic conventions 1.27+), and sqlq's own
#: (``messaging.sqlq.*``: a system's attributes go under its name).
SYSTEM = "messaging.system"
OPERATION_TYPE = "messaging.operation.type"
OPERATION_NAME = "messaging.operation.name"
DESTINATION = "messaging.destination.name"
MESSAGE_ID = "messaging.message.id"
BODY_SIZE = "messaging.message.body.size"
BATCH_COUNT = "messaging.batch.message_count"
ATTEMPT = "messaging.sqlq.job.attempt"
PRIORITY = "messaging.sqlq.job.priority"
OUTCOME = "messaging.sqlq.job.outcome"

#: Seconds between two looks for a tracer provider while none is set: the API's look
#: (``get_tracer_provider``, which reads the environment) costs a put about 3 us, so an
#: application with the API installed but tracing off pays one clock read a put instead.
LOOK_EVERY = 1.0

_tracer: Tracer | None = None
_next_look = 0.0
#: The API's own way to name a provider without code (an entry point in the environment):
#: otherwise there is no provider while no one has imported the API.
BY_ENVIRONMENT = "OTEL_PYTHON_TRACER_PROVIDER" in os.environ


def active() -> bool:
    """Whether spans are made: a tracer provider other than the API's default (whose
    spans are no-ops) is set. Once one is, it stays (OpenTelemetry sets it once); while
    none is, this looks again at most every :data:`LOOK_EVERY` seconds, so a provider
    set after the process's first put counts from the next look."""
    return _tracer is not None or (time.monotonic() >= _next_look and _configure())


def _configure() -> bool:
    global _tracer, _next_look
    if "opentelemetry.trace" not in sys.modules and not BY_ENVIRONMENT:
        # No one imported the API, so no one set a provider: import nothing (the import
        # would cost the first put some 20 ms).
        _next_look = time.monotonic() + LOOK_EVERY
        return False
    from opentelemetry import trace

    provider = trace.get_tracer_provider()
    if isinstance(provider, (trace.ProxyTracerProvider, trace.NoOpTracerProvider)):
        _next_look = time.monotonic() + LOOK_EVERY
        return False
    from ..version import __version__

    _tracer = provider.get_tracer("sqlq", __version__)
    return True


# -- the trace context a job carries -------------------------------------------------------------

def _propagator() -> Any:
    # W3C trace context whatever the global propagator is: what the column holds is sqlq's
    # format, read back by any worker, not the application's choice of headers.
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

    return TraceContextTextMapPropagator()


def _header(span: Span) -> str | None:
    """``span``'s context as the column stores it: traceparent, then a newline and
    tracestate if it has one."""
    from opentelemetry import trace

    carrier: dict[str, str] = {}
    _propagator().inject(carrier, context=trace.set_span_in_context(span))
    parent = carrier.get("traceparent")
    if parent is None:
        return None
    state = carrier.get("tracestate")
    return f"{parent}\n{state}" if state else parent


def _context(header: str) -> Context:
    """The remote context a stored header names (an empty one if it is malformed)."""
    parent, _, state = header.partition("\n")
    carrier = {"traceparent": parent}
    if state:
        carrier["tracestate"] = state
    return _propagator().extract(carrier)  # type: ignore[no-any-return]


def _span_context(header: str) -> SpanContext | None:
    from opentelemetry import trace

    found = trace.get_current_span(_context(header)).get_span_context()
    return found if found.is_valid else None


# -- every verb's span (the dispatcher's: sqlq/verbs/dispatch.py) ------------------------------

class Operation(Protocol):
    """What a verb's span needs of its record (``verbs/dispatch.py``'s ``Verb``): a
    protocol, so tracing stands below the dispatcher that calls it."""

    @property
    def name(self) -> str: ...

    @property
    def op(self) -> str | None: ...


#: A verb's span kind by its operation type (the messaging conventions'); INTERNAL for a
#: verb that is no messaging operation (kick, cancel, progress...).
_KINDS = {"send": "PRODUCER", "receive": "CLIENT", "settle": "CLIENT"}


def operation(verb: V, args: tuple[Any, ...],
              run: Callable[[V, Callable[..., Any], tuple[Any, ...]], T],
              fn: Callable[..., Any], tube: str | None = None) -> T:
    """``run(verb, fn, args)`` under ``verb``'s span: ``send TUBE`` (PRODUCER) around a put,
    put_many or publish (``args[0]`` its :class:`~sqlq.putting.Put`, whose trace context is
    stored with every job it inserts: a worker's run of it is a child of this span),
    ``receive TUBE`` around a claim, ``settle TUBE`` around a delete, release, bury, touch
    or complete, and a span named by the verb around the others. The job's id and tube
    are set from the arguments (``tube``: the job's, known to its handle) or, once
    known, the verb's value."""
    from opentelemetry.trace import SpanKind

    assert _tracer is not None  # the caller tested active()
    op = verb.op
    attributes: dict[str, Any] = {SYSTEM: "sqlq", OPERATION_NAME: verb.name}
    if op is not None:
        attributes[OPERATION_TYPE] = op
    first: Any = args[0] if args else None
    destination = tube
    if op == "send":
        destination = first.tube
        attributes[PRIORITY] = first.priority
        bodies = args[1]
        if verb.name == "put":
            attributes[BODY_SIZE] = len(bodies[0])
        elif isinstance(bodies, bytes):
            attributes[BODY_SIZE] = len(bodies)
        else:
            attributes[BATCH_COUNT] = len(bodies)
    elif first.__class__ is int:
        attributes[MESSAGE_ID] = str(first)
    elif first.__class__ is str and op is None:
        destination = first
    if destination is not None:
        attributes[DESTINATION] = destination
    prefix = op or verb.name
    kind = getattr(SpanKind, _KINDS.get(op or "", "INTERNAL"))
    with _tracer.start_as_current_span(f"{prefix} {destination}" if destination else prefix,
                                       kind=kind, attributes=attributes) as span:
        if op == "send" and span.is_recording():
            header = _header(span)
            if header is not None:
                args = (first._replace(trace=header), *args[1:])
        value = run(verb, fn, args)
        if span.is_recording():
            _described(span, prefix, destination, value)
        return value


def _described(span: Span, prefix: str, destination: str | None, value: Any) -> None:
    """What a verb's value tells its span: the job's id (a put's, a claim's), how many
    (a batch), its tube (a settle's value, a claim's row)."""
    if isinstance(value, list):
        if len(value) == 1 and value[0].__class__ is int:
            span.set_attribute(MESSAGE_ID, str(value[0]))
        elif value:
            span.set_attribute(BATCH_COUNT, len(value))
        value = value[0] if len(value) == 1 else None
    tube = getattr(value, "tube", None) if value is not None else None
    if value.__class__ is str:
        tube = value
    elif tube is not None:
        span.set_attribute(MESSAGE_ID, str(value.id))
    if destination is None and isinstance(tube, str) and tube:  # '': not said
        span.set_attribute(DESTINATION, tube)
        span.update_name(f"{prefix} {tube}")


def in_context(fn: Callable[[], T]) -> Callable[[], T]:
    """``fn`` to run in another thread within the caller's context (its current span):
    AsyncQueue's calls, so an awaited put is a child of the awaiting task's span."""
    context = contextvars.copy_context()
    return lambda: context.run(fn)


# -- consuming ---------------------------------------------------------------------------------

class _Run:
    """The run a worker is in (this context's): its job, its span, whether it failed.
    (A plain class: dataclasses would cost every process that puts an import.)"""

    __slots__ = ("failed", "job_id", "span")

    def __init__(self, job_id: int, span: Span) -> None:
        self.job_id = job_id
        self.span = span
        self.failed = False


_running: contextvars.ContextVar[_Run | None] = contextvars.ContextVar("sqlq_run", default=None)


@contextlib.contextmanager
def processing(job: Processed, earlier: str | None) -> Iterator[None]:
    """A CONSUMER span ``process TUBE`` around a worker's run of ``job`` (reserved): a child
    of the context the job's put stored, linked to it and to ``earlier``, the span of its
    previous failed run (``Operations.last_trace``). At its end the span says what became
    of the job (:data:`OUTCOME`): ``deleted`` (succeeded; deleted with the next claim),
    ``completed`` (its result stored), ``released`` (a retry, or given back), ``buried``,
    or ``failed`` (it failed after its reservation was lost: it runs again)."""
    from opentelemetry.trace import Link, SpanKind

    assert _tracer is not None  # the caller tested active()
    # The put's context is the parent and, as the conventions ask of a "process" span,
    # a link too (a backend that shows a process span as its own trace still finds it).
    parent = _context(job.trace) if job.trace else None
    links = [Link(c) for c in (_span_context(job.trace) if job.trace else None,
                               _span_context(earlier) if earlier else None) if c is not None]
    attributes: dict[str, Any] = {
        SYSTEM: "sqlq", OPERATION_TYPE: "process", OPERATION_NAME: "process",
        DESTINATION: job.tube, MESSAGE_ID: str(job.id), ATTEMPT: job.reserves,
        PRIORITY: job.priority, BODY_SIZE: len(job.body)}
    with _tracer.start_as_current_span(
            f"process {job.tube}", context=parent, kind=SpanKind.CONSUMER,
            attributes=attributes, links=links) as span:
        run = _Run(job.id, span)
        token = _running.set(run)
        try:
            yield
        finally:
            _running.reset(token)
            span.set_attribute(OUTCOME, _outcome(job.state, run.failed))


def _outcome(state: str, failed: bool) -> str:
    """What became of a job by the state its handle was left in after the run."""
    if state == "deleted":
        return "completed"  # deleted by complete(), with its result
    if state == "buried":
        return "buried"
    if state in ("ready", "delayed"):
        return "released"
    return "failed" if failed else "deleted"


def failure(job_id: int, error: str, message: str, traceback: str) -> str | None:
    """A failed run of ``job_id`` is being kept (sqlq/attempts.py): mark the run's span as
    an error, with the conventions' exception event; return the span's traceparent for
    the attempt's row (None outside a traced run of that job)."""
    run = _running.get()
    if run is None or run.job_id != job_id:
        return None
    from opentelemetry.trace import Status, StatusCode

    run.failed = True
    span = run.span
    span.set_status(Status(StatusCode.ERROR, message or error))
    span.set_attribute("error.type", error or "_OTHER")
    span.add_event("exception", {"exception.type": error or "sqlq.Failed",
                                 "exception.message": message,
                                 "exception.stacktrace": traceback})
    header = _header(span) if span.is_recording() else None
    return None if header is None else header.partition("\n")[0]


def environment() -> dict[str, str]:
    """``TRACEPARENT`` (and ``TRACESTATE``) of the current span, for a command's child
    process (OpenTelemetry's environment-variable carrier); empty without one."""
    from opentelemetry import trace

    span = trace.get_current_span()
    if not span.is_recording():
        return {}
    header = _header(span)
    if header is None:
        return {}
    parent, _, state = header.partition("\n")
    return {"TRACEPARENT": parent, **({"TRACESTATE": state} if state else {})}
