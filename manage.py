#!/usr/bin/env python
"""Django's command-line utility for administrative tasks."""
import os
import sys


def main():
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "flashsale.settings.base")
    from django.core.management import execute_from_command_line

    from flashsale import boot

    # Django starts here, the collector paused (flashsale.boot); the command's own
    # django.setup() then finds the apps loaded.
    boot.setup_for_command()
    execute_from_command_line(sys.argv)


if __name__ == "__main__":
    main()
