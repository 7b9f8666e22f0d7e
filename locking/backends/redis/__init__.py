"""Redis locks: ``setnx`` (SET NX PX with a per-holder token), ``redisson`` (a
reentrant hash lock with a watchdog and pub/sub wake-ups, after Redisson's RLock),
``redisson-fair`` (the same, first come first served) and a read-write lock after
Redisson's RReadWriteLock (``redisson_rw``).

All are as safe as one Redis master is: if the master fails over before the lock
key reached the replica, a second client can take the same lock (scenario S10).
"""
