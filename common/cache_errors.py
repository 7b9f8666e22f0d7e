"""What a cache call can raise when Redis is slow or gone. The purchase's Redis fast
paths (the idempotency flags, the sale's state) and the product's cached read catch
exactly this, and fall back to the database: an unreachable Redis costs work, never
a wrong answer."""

from django_redis.exceptions import ConnectionInterrupted
from redis.exceptions import RedisError

CACHE_ERRORS = (ConnectionInterrupted, RedisError, OSError)
