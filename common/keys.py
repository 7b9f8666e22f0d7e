"""Where a signed-in buyer's Idempotency-Key is kept, and the key it was sent as.

With buyers signed in, each buyer's keys are a space of their own: another buyer's
use of the same key neither replays nor blocks a buyer's purchase. The orders keep
the key as ``<buyer>/<key>`` (a buyer's name holds no "/", so the first one splits
the two), or, where that is longer than the column, ``~`` and a digest of the two (a
name never starts with "~"). Plain functions, for the apps and for the auditors that
read MariaDB from outside them (``loadtest.truth``).
"""

from __future__ import annotations

import base64
import hashlib
import re

KEY_MAX_LENGTH = 128  # the orders' column (Order.idempotency_key)

# An Idempotency-Key as a client may send it: visible ASCII, as HTTP header values
# allow; long enough for a UUID or a ULID with a prefix, short enough for the unique
# index. No space: the flags the ledger writes for other operations hold one.
KEY_SENT = re.compile(r"[\x21-\x7e]{1,128}")


def key_scoped(buyer: str, key: str) -> str:
    """The key ``buyer`` sent, as the orders keep it."""
    scoped = f"{buyer}/{key}"
    if len(scoped) <= KEY_MAX_LENGTH:
        return scoped
    digest = hashlib.sha256(f"{buyer}\0{key}".encode()).digest()
    return "~" + base64.urlsafe_b64encode(digest).decode().rstrip("=")


def key_sent(buyer: str, kept: str) -> str:
    """The key an order of ``buyer`` was sent with, read back from the one it keeps
    (a digest stays as it is: it cannot be read back)."""
    prefix = f"{buyer}/"
    return kept[len(prefix):] if kept.startswith(prefix) else kept
