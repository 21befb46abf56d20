"""The Queue's verbs for applications, by kind: each module a class that ``queue.py``'s
:class:`~sqlq.Queue` inherits, so that ``queue.py`` holds the Queue's life, its reserves
and the verbs that change a job.

===================  ===========================================================================
``puts.py``          ``Puts``: put, put_many, publish and the subscriptions; ``Transaction``
                     (``sqlq.Transaction``); ``verbs_in``, the verbs of ``Job.step(conn=)``
``reads.py``         ``Reads``: the reads docs/spec.md names for applications; ``Links``
``flow.py``          ``FlowControl``: a tube's pause, limits and retention
===================  ===========================================================================

Each checks arguments, shapes results and calls one verb (``sqlq/verbs/``); none imports
``queue.py``, which stands above them.
"""
