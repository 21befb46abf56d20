"""The OpenTelemetry SDK for the tracing tests' processes, set up at import
(``sqlq work --import tests.otel_spans``, or ``import tests.otel_spans`` in a producer):
the global tracer provider with the SDK's in-memory exporter, whose finished spans the
process writes at exit to ``$SQLQ_TEST_SPANS/spans-PID.json`` (one file per process:
a worker's supervisor imports this module too). :func:`read` gathers them."""

from __future__ import annotations

import atexit
import json
import os
from pathlib import Path
from typing import Any

from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter


def as_record(span: ReadableSpan) -> dict[str, Any]:
    """A finished span as plain JSON: ids in hex, as a traceparent writes them."""
    context = span.get_span_context()
    assert context is not None
    return {"name": span.name, "kind": span.kind.name,
            "trace_id": f"{context.trace_id:032x}", "span_id": f"{context.span_id:016x}",
            "parent_id": None if span.parent is None else f"{span.parent.span_id:016x}",
            "parent_trace_id": None if span.parent is None else f"{span.parent.trace_id:032x}",
            "attributes": dict(span.attributes or {}),
            "links": [{"trace_id": f"{link.context.trace_id:032x}",
                       "span_id": f"{link.context.span_id:016x}"} for link in span.links],
            "status": span.status.status_code.name,
            "events": [event.name for event in span.events], "pid": os.getpid()}


def read(directory: Path) -> list[dict[str, Any]]:
    """Every span the processes that used ``directory`` wrote."""
    return [span for path in sorted(directory.glob("spans-*.json"))
            for span in json.loads(path.read_text())]


_exporter = InMemorySpanExporter()
_directory = os.environ.get("SQLQ_TEST_SPANS")
if _directory:
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(_exporter))
    trace.set_tracer_provider(provider)

    @atexit.register
    def _dump() -> None:
        spans = [as_record(span) for span in _exporter.get_finished_spans()]
        Path(_directory, f"spans-{os.getpid()}.json").write_text(json.dumps(spans))
