"""``python -m sqlq.server``: the same as ``sqlq-beanstalkd``."""

from sqlq.server.main import beanstalkd_main

if __name__ == "__main__":
    beanstalkd_main()
