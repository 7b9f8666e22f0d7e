"""Test settings: base, with only what the suite needs changed.

pytest-django creates ``test_<dbname>`` on the stack's MariaDB; the suite's Redis keys
live in a database of their own (1) of each of the stack's Redis servers, so clearing
them never touches the stack's. Each lane of ``make test`` runs two pytest at once on
its stack (stack/suite.py): the second (FLASHSALE_TEST_WORKER=1) has ``test_<dbname>_1``,
Redis database 2 and ZooKeeper locks under a root of its own, so neither touches the
other's.
"""

from .base import *  # noqa: F403
from .base import CACHES, DATABASES, INSTALLED_APPS, LOCKING, REDIS_GATE_PORT, REDIS_PORT, STORAGES, env

# First: its flush stands in for Django's (flashsale/testdb/management/commands/flush.py).
INSTALLED_APPS = ["flashsale.testdb", *INSTALLED_APPS]

WORKER = env.int("FLASHSALE_TEST_WORKER", default=0)
if WORKER:
    DATABASES["default"]["TEST"] = {**DATABASES["default"]["TEST"],
                                    "NAME": f"test_{DATABASES['default']['NAME']}_{WORKER}"}
TEST_REDIS_DB = 1 + WORKER
TEST_REDIS_URL = env.str("TEST_REDIS_URL", default=f"redis://127.0.0.1:{REDIS_PORT}/{TEST_REDIS_DB}")
CACHES["default"]["LOCATION"] = TEST_REDIS_URL
for _alias in LOCKING.values():
    if "url" in _alias.get("OPTIONS", {}):
        _alias["OPTIONS"]["url"] = TEST_REDIS_URL
FLASHSALE_GATE_REDIS_URL = env.str("TEST_GATE_REDIS_URL", default=f"redis://127.0.0.1:{REDIS_GATE_PORT}/{TEST_REDIS_DB}")
LOCKING["zookeeper"]["OPTIONS"]["root"] = f"/flashsale-test/{WORKER}/locks"
FLASHSALE_INSTANCE = "test"
FLASHSALE_ADMIN_TOKEN = "test-admin-token"
FLASHSALE_SECTION_DELAY_MS = 0.0
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
# Throttles off, as on the local stack; their own tests turn them on.
FLASHSALE_THROTTLE_USER = ""
FLASHSALE_THROTTLE_ADDRESS = ""
FLASHSALE_ADMIN_FAILURES = ""
# New buyers without proof of work, as on the local stack; its own tests ask for it.
FLASHSALE_SIGN_UP_CHALLENGE_BITS = 0
# Withdrawn buyers read from Redis at each check: each test clears it, so no process
# copy outlives its test (buyers.withdrawals' own tests set a period).
FLASHSALE_BUYER_WITHDRAWN_REFRESH_S = 0.0
# The suite renders pages without running collectstatic: no manifest to look names up in.
STORAGES = {**STORAGES, "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"}}
