"""Trace ids on the job page, and links from them to a tracing UI (``--trace-url``).

A traced put stores its W3C context with the job (``traceparent``, then a newline and
``tracestate`` if any); every run of the job is a span of the same trace, and each failed
run keeps its own ``traceparent`` (sqlq/attempts.py). The page shows the trace id (the
32 hex digits Jaeger, Tempo and Honeycomb search by) and, given a template such as
``https://jaeger.example/trace/{trace_id}``, links it there.

The template is checked once, when the dashboard starts: an absolute http(s) URL with
``{trace_id}`` in it and no other braces, so a link can never be ``javascript:`` or
point at a relative path of this site. Only a well-formed id (hex digits) is put in it,
and the page's autoescape writes the attribute.
"""

from __future__ import annotations

import string
from dataclasses import dataclass
from urllib.parse import urlsplit

from sqlq.errors import Error

#: Where the trace id goes in a ``--trace-url`` template.
PLACEHOLDER = "{trace_id}"
#: The schemes a link to a tracing UI may have.
SCHEMES = ("http", "https")


def check_trace_url(template: str) -> str:
    """``template`` if it makes safe links to a tracing UI; a one-line Error otherwise."""
    if PLACEHOLDER not in template:
        raise Error(f"--trace-url must contain {PLACEHOLDER} (where the trace id goes), "
                    f"not {template!r}")
    probe = template.replace(PLACEHOLDER, "0" * 32)
    if "{" in probe or "}" in probe:
        raise Error(f"--trace-url may hold no braces but {PLACEHOLDER}: {template!r}")
    if any(not c.isprintable() or c.isspace() for c in template):
        raise Error(f"--trace-url may hold no spaces or control characters: {template!r}")
    try:
        scheme, netloc = urlsplit(probe)[:2]
    except ValueError:  # a malformed [IPv6] host
        scheme = netloc = ""
    if scheme.lower() not in SCHEMES or not netloc:
        raise Error(f"--trace-url must be an http:// or https:// URL, not {template!r}")
    return template


@dataclass(frozen=True)
class TraceRef:
    """A stored trace context as the page shows it."""

    trace_id: str  #: the trace id, or the stored text as is if it is not a traceparent
    traceparent: str  #: the whole traceparent (the tooltip)
    url: str | None  #: the link to the tracing UI, if a template was given and the id is good


def trace_ref(context: str | None, template: str | None) -> TraceRef | None:
    """The trace id of a stored context (a ``traceparent`` line, maybe a ``tracestate``
    line after it) with its link; None when there is none."""
    if not context:
        return None
    traceparent = context.split("\n", 1)[0].strip()
    fields = traceparent.split("-")
    if len(fields) != 4 or not _hex(fields[1], 32) or not _hex(fields[2], 16):
        return TraceRef(traceparent, traceparent, None)
    trace_id = fields[1]
    url = template.replace(PLACEHOLDER, trace_id) if template else None
    return TraceRef(trace_id, traceparent, url)


def _hex(text: str, length: int) -> bool:
    return len(text) == length and all(c in string.hexdigits for c in text)
