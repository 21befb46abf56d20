"""``python -m sqlq.server``: the same as ``sqlq-beanstalkd``."""

from sqlq.server.main import beanstalkd_main

beanstalkd_main()
