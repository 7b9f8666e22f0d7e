"""WSGI entry point for gunicorn: ``gunicorn flashsale.wsgi``.

Django's handler, with the sale's plain purchases answered before its middleware
chain: the orders app's ``PurchaseWSGIHandler`` (``orders.wsgi``), where
``get_wsgi_application`` would make the plain one."""

import os

import django
from django.utils.module_loading import import_string

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "flashsale.settings.base")
django.setup(set_prefix=False)

# Named, as the routes are (flashsale.urls), so the project shell imports no app.
application = import_string("orders.wsgi.PurchaseWSGIHandler")()
