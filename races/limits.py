"""A race's bounds and defaults, in a plain module: the API holds requests to them, and the load
tools (``make race``) read them without Django."""

MAX_BUYERS = 20_000  # buyers per strategy: each buys once from every strategy's product
MAX_CONCURRENCY = 256  # requests in flight at once, over all the strategies
MAX_STOCK = 100_000
MAX_ROOM_RATE = 100_000  # a waiting room's admissions a second, as a sale's reset allows
RACE_SKU_PREFIX = "race-"  # one product per strategy: race-<strategy>
# What a race runs when not told: the weak two beside the locks and the lock-free one.
DEFAULT_STRATEGIES = ("none", "local", "setnx", "redisson", "zookeeper", "atomic")
