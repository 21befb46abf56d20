"""``@q.task`` and ``@q.periodic`` as their producers see them: what a task is, below the
faces that hand tasks out (``Queue``, ``AsyncQueue``, workflows, sqlq.contrib) and the
worker that runs them (``work/``), so both import it and it imports neither.

===================  ===========================================================================
``task.py``          ``Task``, ``TaskOptions``, ``Signature``, the JSON call in a job's body, the
                     registry of task names
``retry.py``         ``RetryPolicy``: how many runs, and the backoff between them (tenacity)
``periodic.py``      ``Schedule`` (every/cron): when a periodic task's slots start
===================  ===========================================================================
"""
