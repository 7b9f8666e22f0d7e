-- Delete a read-write lock whoever holds it, in either mode, and wake every waiter.
-- KEYS[1]  the lock, KEYS[2] the readers' leases, KEYS[3] the lock's pub/sub channel
-- ARGV[1]  the message that wakes every waiter
-- Returns 1 if a lock was deleted, 0 if it was free.
if redis.call('del', KEYS[1], KEYS[2]) == 0 then
    return 0
end
redis.call('publish', KEYS[3], ARGV[1])
return 1
