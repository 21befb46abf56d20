"""sqlq inside the web frameworks its users already run.

* :mod:`sqlq.contrib.django`: a Django app (``settings.SQLQ``, ``manage.py sqlq``,
  tasks found in each app's ``tasks.py``, puts that follow ``transaction.atomic()``);
* :mod:`sqlq.contrib.flask`: a Flask extension.

What both need lives once in :mod:`sqlq.contrib._shared`. Nothing here is imported
by ``import sqlq``: a framework is needed only by the application that uses it.
"""
