-- Delete the lock whoever holds it, and wake the waiters.
-- KEYS[1]  the lock key
-- KEYS[2]  the lock's pub/sub channel
-- ARGV[1]  the message published on the channel
-- Returns 1 if a lock was deleted, 0 if it was free.
if redis.call('del', KEYS[1]) == 1 then
    redis.call('publish', KEYS[2], ARGV[1])
    return 1
end
return 0
