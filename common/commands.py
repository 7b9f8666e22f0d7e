"""The base of the shop's management commands."""

from django.core.management.base import BaseCommand


class CommandWithoutChecks(BaseCommand):
    """A command that starts without Django's system checks. The checks read the URL
    conf, and so import every view and what the views import (DRF's renderers, the
    schema's generator), in each persister, expirer and race runner the stack starts
    and in each operator's command (``gate_leave`` holds a strategy switch's
    purchases until it has started). None of these commands serves a URL, and the
    checks run where they matter: ``migrate`` (every ``stack up``) and ``manage.py
    check --deploy``."""

    requires_system_checks: list[str] = []
