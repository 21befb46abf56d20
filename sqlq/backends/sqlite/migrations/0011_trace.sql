-- sqlq schema 11: the trace context a job carries from its producer to its worker
-- (OpenTelemetry, sqlq/tracing.py; issue 26).
--
-- sqlq_jobs.trace holds the W3C trace context of the span that put the job: its
-- traceparent, and its tracestate after a newline when it has one. It sits beside the
-- body, never inside it (a body is the application's bytes). It is written only by a
-- put made under a recording span (the SDK configured, the span sampled), in the put's
-- transaction; every other put leaves it NULL and writes nothing more than before.
-- Every claim returns it, so the worker's span joins the producer's trace.
--
-- sqlq_attempts.trace holds the traceparent of the worker's span for a failed run, so
-- the span of the job's next run can link the attempt before it (NULL untraced).
-- ADD COLUMN without a default rewrites no row.

ALTER TABLE sqlq_jobs ADD COLUMN trace TEXT;
ALTER TABLE sqlq_attempts ADD COLUMN trace TEXT;
