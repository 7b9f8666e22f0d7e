-- The watchdog's renewal: push the lease out again if the holder still holds.
-- KEYS[1]  the lock key
-- ARGV[1]  lease in milliseconds
-- ARGV[2]  the holder: "<client id>:<thread id>"
-- Returns 1 if renewed, 0 if the holder no longer holds the lock.
local value = redis.call('get', KEYS[1])
if value then
    local _, holder = held_by(value)
    if holder == ARGV[2] then
        redis.call('pexpire', KEYS[1], ARGV[1])
        return 1
    end
end
return 0
