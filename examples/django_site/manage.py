#!/usr/bin/env python
"""The example site's manage.py: `python manage.py migrate`, `runserver`, `sqlq work`."""
import os
import sys

if __name__ == "__main__":
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "site_config.settings")
    from django.core.management import execute_from_command_line

    execute_from_command_line(sys.argv)
