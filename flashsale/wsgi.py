"""WSGI entry point for gunicorn: ``gunicorn flashsale.wsgi``.

Django's handler, with the sale's plain purchases answered before its middleware
chain (``orders.front``); ``get_wsgi_application`` would make the plain one."""

import os

import django

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "flashsale.settings.base")
django.setup(set_prefix=False)

from orders.front import FrontHandler  # noqa: E402  (the apps are ready only now)

application = FrontHandler()
