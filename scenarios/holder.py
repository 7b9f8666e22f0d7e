"""A process that takes a lock and then waits to be killed (scenario S3).

    python -m scenarios.holder setnx-no-expiry|set-nx-px REDIS_URL KEY TTL_MS
"""

import sys
import time

import redis

from locking.teaching.redis_naive import NaiveSetnxLock


def main(kind: str, url: str, key: str, ttl_ms: int) -> None:
    client = redis.Redis.from_url(url)
    lock = NaiveSetnxLock(client, key, ttl_ms=None if kind == "setnx-no-expiry" else ttl_ms)
    if not lock.acquire():
        sys.exit("the lock was already held")
    print("held", flush=True)
    while True:
        time.sleep(60)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]))
