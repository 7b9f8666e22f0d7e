"""WSGI entry point for gunicorn: ``gunicorn flashsale.wsgi``.

Django's handler, with the sale's plain purchases answered before its middleware
chain: the orders app's ``PurchaseWSGIHandler`` (``orders.wsgi``), where
``get_wsgi_application`` would make the plain one."""

import os

from flashsale import boot

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "flashsale.settings.base")
boot.setup(set_prefix=False)  # the collector paused while Django starts (flashsale.boot)

from orders.wsgi import PurchaseWSGIHandler  # noqa: E402 (the apps load after setup)

application = PurchaseWSGIHandler()
boot.preload()  # what the first requests would import, in the master before it forks
