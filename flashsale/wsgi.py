"""WSGI entry point for gunicorn: ``gunicorn flashsale.wsgi``.

Django's handler, with the sale's plain purchases answered before its middleware
chain: the orders app's ``PurchaseWSGIHandler`` (``orders.wsgi``), where
``get_wsgi_application`` would make the plain one."""

import os

import django

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "flashsale.settings.base")
django.setup(set_prefix=False)

from orders.wsgi import PurchaseWSGIHandler  # noqa: E402 (the apps load after setup)

application = PurchaseWSGIHandler()
