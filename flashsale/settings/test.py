"""Test settings: base, with only what the suite needs changed.

pytest-django creates ``test_<dbname>`` on the stack's MariaDB; Redis keys get
their own prefix so the suite never touches the running stack's flags.
"""

from .base import *  # noqa: F403
from .base import CACHES

CACHES["default"]["KEY_PREFIX"] = "flashsale-test"
FLASHSALE_INSTANCE = "test"
FLASHSALE_ADMIN_TOKEN = "test-admin-token"
FLASHSALE_RACE_DELAY_MS = 0.0
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
