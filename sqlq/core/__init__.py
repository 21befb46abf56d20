"""The ground floor: what every layer above names and which imports none of them.

Durations and the clock (``durations``), flow control's rules (``limits``,
``allowance``), the workers registry's liveness (``registry``), spans (``tracing``),
safe text (``display``), the extras' install hints and sqlq's loggers. The job model
(``sqlq.model``, ``sqlq.steps``, ``sqlq.putting``), what a job's end leaves
(``sqlq.results``) and the records the reads return (``sqlq.observe``,
``sqlq.finished``...) stand above it, at the top beside the faces.
"""
