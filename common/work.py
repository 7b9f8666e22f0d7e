"""A proof of work's arithmetic, without Django: the server's checker
(``common.challenges``) counts a digest's zero bits with it, and the load tools
(``loadtest.client``) solve with it, as the pages' Web Worker does
(``orders/static/orders/pow-worker.js``)."""

from __future__ import annotations

import hashlib


def zero_bits(digest: bytes) -> int:
    """How many zero bits ``digest`` starts with."""
    value = int.from_bytes(digest, "big")
    return len(digest) * 8 - value.bit_length()


def challenge_solve(token: str, bits: int) -> str:
    """A solution of ``token`` (``<token>:<nonce>``): the first nonce whose SHA-256 of
    ``<token>:<nonce>`` starts with ``bits`` zero bits."""
    prefix = f"{token}:".encode()
    nonce = 0
    while zero_bits(hashlib.sha256(prefix + str(nonce).encode()).digest()) < bits:
        nonce += 1
    return f"{token}:{nonce}"
