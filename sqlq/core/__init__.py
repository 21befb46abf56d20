"""The ground floor: what every layer above names and which imports none of them.

The description of a put (``putting``), flow control's rules (``limits``, ``allowance``),
what a job's end leaves (``results``), the workers registry (``registry``), durations
and the clock, spans (``tracing``), safe text (``display``), the extras' install hints
and sqlq's loggers. The job model (``sqlq.model``, ``sqlq.steps``) and the records the
reads return (``sqlq.observe``, ``sqlq.finished``...) stay at the top, beside the faces,
as the public API names them.
"""
