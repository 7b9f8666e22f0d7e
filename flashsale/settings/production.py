"""Settings for a deployment that others can reach, behind a TLS terminator (a load
balancer or a proxy in front of nginx): ``DJANGO_SETTINGS_MODULE=flashsale.settings.production``.

Everything ``base`` reads from the environment, plus what such a deployment needs
and ``base`` leaves open for the loopback stack: credentials of its own (a secret key
and an admin token of at least 32 characters, a database password, a Redis password,
ZooKeeper credentials; none well known; each process the ones its kind uses,
``flashsale.settings.processes``),
two trusted proxies (the terminator and nginx), cookies sent over HTTPS only, HSTS,
and the scheme the terminator saw. It also refuses to start with buyers' credentials
off, a short buyer token key, or no cap per buyer unless one is said to be meant.

``manage.py check --deploy`` reports one warning here, by design: W008, because the
redirect from HTTP to HTTPS belongs to the terminator, which alone sees the plain
request (``DJANGO_SECURE_SSL_REDIRECT=true`` makes Django do it instead).
``tests/test_settings.py`` holds it to that.
"""

from __future__ import annotations

from urllib.parse import urlsplit

from django.core.exceptions import ImproperlyConfigured

from . import processes
from .base import *  # noqa: F403
from .base import (
    DATABASES,
    FLASHSALE_ADMIN_TOKEN,
    FLASHSALE_BUYER_AUTH,
    FLASHSALE_BUYER_TOKEN_KEY,
    FLASHSALE_GATE_REDIS_URL,
    FLASHSALE_PER_USER_LIMIT,
    FLASHSALE_PROCESS,
    FLASHSALE_QUICK_PASSWORD_HASHING,
    PROCESS_NEEDS,
    REDIS_URL,
    REST_FRAMEWORK,
    SECRET_MIN_LENGTH,
    WELL_KNOWN_SECRETS,
    ZOOKEEPER_AUTH,
    env,
    refuse_weak_secrets,
    weak_secret,
)

DEBUG = False
# A deployment makes its own key; a process of a kind that signs nothing has none, and
# Django refuses the empty key where anything reads it.
SECRET_KEY = env.str("DJANGO_SECRET_KEY", default="")
# Whatever the bind address says: a deployment is reachable by others. Both Redis
# servers hold what the sale's answers rest on (the gate's orders, the keys' flags, the
# locks): no client without their password (REDIS_PASSWORD, or each URL's own). The
# zookeeper lock's nodes are its user's alone (ZOOKEEPER_AUTH, user:password), so no
# other client takes or removes a lock. Each kind of process is held to the secrets
# it uses (flashsale.settings.processes), and every one to its database user's.
_redis_passwords = [urlsplit(url).password or "" for url in (REDIS_URL, FLASHSALE_GATE_REDIS_URL)]
_secrets = {
    processes.SECRET_KEY: (SECRET_KEY, SECRET_MIN_LENGTH),
    processes.ADMIN_TOKEN: (FLASHSALE_ADMIN_TOKEN, SECRET_MIN_LENGTH),
    # either Redis URL's, the weak one first
    processes.REDIS_PASSWORD: (next((p for p in _redis_passwords if p in WELL_KNOWN_SECRETS),
                                    _redis_passwords[0]), 1),
    processes.ZOOKEEPER_AUTH: (ZOOKEEPER_AUTH.partition(":")[2], 1),
}
refuse_weak_secrets(f"under the production settings (FLASHSALE_PROCESS={FLASHSALE_PROCESS})", {
    "DB_PASSWORD": (DATABASES["default"].get("PASSWORD", ""), 1),
    **{name: _secrets[name] for name in PROCESS_NEEDS}})

# What would turn the sale's rules off for everyone is refused too: buyers named by
# the request's body, a token key short enough to find offline from one token anyone
# can get, and no cap on what one buyer takes, unless a setting says that is meant.
FLASHSALE_PER_USER_LIMIT_OFF = env.bool("FLASHSALE_PER_USER_LIMIT_OFF", default=False)
_open = [why for why, is_open in (
    ("FLASHSALE_BUYER_AUTH is false (a purchase's buyer would be whatever its body says, and "
     "anyone could read and pay every order)", not FLASHSALE_BUYER_AUTH),
    (f"FLASHSALE_BUYER_TOKEN_KEY is well known or shorter than {SECRET_MIN_LENGTH} characters (leave it "
     "empty to derive it from DJANGO_SECRET_KEY)",
     FLASHSALE_BUYER_TOKEN_KEY != "" and weak_secret(FLASHSALE_BUYER_TOKEN_KEY, SECRET_MIN_LENGTH)),
    ("FLASHSALE_PER_USER_LIMIT is not above 0 (one buyer could take the whole stock): set the units one "
     "buyer may buy, or FLASHSALE_PER_USER_LIMIT_OFF=true to say no cap is meant",
     FLASHSALE_PER_USER_LIMIT <= 0 and not FLASHSALE_PER_USER_LIMIT_OFF),
    ("FLASHSALE_QUICK_PASSWORD_HASHING is true (passwords would be kept as salted MD5, a test suite's "
     "hasher)",
     FLASHSALE_QUICK_PASSWORD_HASHING),
) if is_open]
if _open:
    raise ImproperlyConfigured(
        f"refusing to start: under the production settings while {'; '.join(_open)}")

# The proxies in front of the apps: the TLS terminator, then nginx. Each appends the
# address it saw to X-Forwarded-For, so the buyer's is the second from the end; with
# one (base's default, nginx alone) every buyer would be the terminator, and the
# per-address throttles one bucket for the whole sale. One more for each further
# proxy (a CDN in front of the terminator).
REST_FRAMEWORK = {**REST_FRAMEWORK, "NUM_PROXIES": env.int("FLASHSALE_TRUSTED_PROXIES", default=2)}

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
