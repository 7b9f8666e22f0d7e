"""The strategy switch's barrier: no purchase under the new strategy while one under
the old may still run.

Two strategies must not sell one product at once: ``setnx`` and ``redisson`` each
read, check and write the stock under a lock the other never takes, and lose each
other's updates. So the stack (``stack.control``) starts the instances of a new
strategy held: their purchases wait until a file exists
(``FLASHSALE_PURCHASES_HELD_UNTIL_FILE``), which it creates once the last instance of the
old strategy has answered its last purchase and stopped. A held purchase waits
within its deadline, then answers 503 ``busy`` with nothing written.
"""

from __future__ import annotations

import os
import time

from django.conf import settings

from common.errors import Busy

POLL = 0.01  # seconds between looks at the file while held

# Once the file is seen, never looked for again by this process: the stack removes
# a strategy's file only before it starts instances of that strategy anew.
_released = False


def barrier_pass(*, sku: str, deadline: float) -> None:
    """Return once this process may sell (at once, unless it started held).

    :raises Busy: still held at ``deadline``; nothing was written.
    """
    global _released
    if _released:
        return
    path = settings.FLASHSALE_PURCHASES_HELD_UNTIL_FILE
    while path and not os.path.exists(path):
        if time.monotonic() + POLL > deadline:
            raise Busy(f"{sku}: the deployment is switching strategy; nothing was written")
        time.sleep(POLL)
    _released = True
