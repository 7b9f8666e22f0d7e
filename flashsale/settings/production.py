"""Settings for a deployment that others can reach, behind a TLS terminator (a load
balancer or a proxy in front of nginx): ``DJANGO_SETTINGS_MODULE=flashsale.settings.production``.

Everything ``base`` reads from the environment, plus what such a deployment needs
and ``base`` leaves open for the loopback stack: a secret key of its own (required,
no default), cookies sent over HTTPS only, HSTS, and the scheme the terminator saw.

``manage.py check --deploy`` reports one warning here, by design: W008, because the
redirect from HTTP to HTTPS belongs to the terminator, which alone sees the plain
request (``DJANGO_SECURE_SSL_REDIRECT=true`` makes Django do it instead).
``flashsale/tests/test_settings.py`` holds it to that.
"""

from __future__ import annotations

from .base import *  # noqa: F403
from .base import env

DEBUG = False
SECRET_KEY = env.str("DJANGO_SECRET_KEY")  # no default: a deployment makes its own

# TLS ends in front of nginx: trust the scheme the terminator reports. nginx passes
# X-Forwarded-Proto through as it came, so nginx must be reachable by the terminator
# only; a client that reached it directly could claim https.
SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
SECURE_SSL_REDIRECT = env.bool("DJANGO_SECURE_SSL_REDIRECT", default=False)
SESSION_COOKIE_SECURE = True
CSRF_COOKIE_SECURE = True
SECURE_HSTS_SECONDS = env.int("DJANGO_SECURE_HSTS_SECONDS", default=365 * 24 * 3600)
SECURE_HSTS_INCLUDE_SUBDOMAINS = env.bool("DJANGO_SECURE_HSTS_INCLUDE_SUBDOMAINS", default=True)
SECURE_HSTS_PRELOAD = env.bool("DJANGO_SECURE_HSTS_PRELOAD", default=True)
