-- The fair lock's watchdog renewal (its lock is a hash): push the lease out again
-- if the holder still holds.
-- KEYS[1]  the lock key
-- ARGV[1]  lease in milliseconds
-- ARGV[2]  the holder: "<client id>:<thread id>"
-- Returns 1 if renewed, 0 if the holder no longer holds the lock.
if redis.call('hexists', KEYS[1], ARGV[2]) == 1 then
    redis.call('pexpire', KEYS[1], ARGV[1])
    return 1
end
return 0
