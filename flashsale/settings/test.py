"""Test settings: base, with only what the suite needs changed.

pytest-django creates ``test_<dbname>`` on the stack's MariaDB; the suite's Redis
keys live in their own database (1), so clearing them never touches the stack's.
"""

from .base import *  # noqa: F403
from .base import CACHES, REDIS_PORT, env

CACHES["default"]["LOCATION"] = env.str("TEST_REDIS_URL", default=f"redis://127.0.0.1:{REDIS_PORT}/1")
FLASHSALE_INSTANCE = "test"
FLASHSALE_ADMIN_TOKEN = "test-admin-token"
FLASHSALE_RACE_DELAY_MS = 0.0
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
