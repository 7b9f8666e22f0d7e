"""Test settings: base, with only what the suite needs changed.

pytest-django creates ``test_<dbname>`` on the stack's MariaDB; the suite's Redis
keys live in their own database (1) of each of the stack's Redis servers, so clearing
them never touches the stack's.
"""

from .base import *  # noqa: F403
from .base import CACHES, LOCKING, REDIS_GATE_PORT, REDIS_PORT, STORAGES, env

TEST_REDIS_URL = env.str("TEST_REDIS_URL", default=f"redis://127.0.0.1:{REDIS_PORT}/1")
CACHES["default"]["LOCATION"] = TEST_REDIS_URL
for _alias in LOCKING.values():
    if "url" in _alias.get("OPTIONS", {}):
        _alias["OPTIONS"]["url"] = TEST_REDIS_URL
FLASHSALE_GATE_REDIS_URL = env.str("TEST_GATE_REDIS_URL", default=f"redis://127.0.0.1:{REDIS_GATE_PORT}/1")
LOCKING["zookeeper"]["OPTIONS"]["root"] = "/flashsale-test/locks"
FLASHSALE_INSTANCE = "test"
FLASHSALE_ADMIN_TOKEN = "test-admin-token"
FLASHSALE_SECTION_DELAY_MS = 0.0
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
# Throttles off, as on the local stack; their own tests turn them on.
FLASHSALE_THROTTLE_USER = ""
FLASHSALE_THROTTLE_ADDRESS = ""
FLASHSALE_ADMIN_FAILURES = ""
# The suite renders pages without running collectstatic: no manifest to look names up in.
STORAGES = {**STORAGES, "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"}}
