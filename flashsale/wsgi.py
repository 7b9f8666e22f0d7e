"""WSGI entry point for gunicorn: ``gunicorn flashsale.wsgi``."""

import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "flashsale.settings.base")

application = get_wsgi_application()
