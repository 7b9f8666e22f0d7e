"""Base with the stock row's fencing stamp off: the broken half of a lesson, never a
deployment's settings.

Only the verdicts' ``partition-holder-db-unfenced`` runs it, on app instances on test
hosts (``stack.hosted``): a Redis lock holder cut off from MariaDB past its lease then
writes over the next holder's sale, as article 003 says a lease alone allows. Scenario
S17 shows the same in one process with ``override_settings``.
"""

from .base import *  # noqa: F403

FLASHSALE_FENCING = False
