-- A waiter gives up (its wait timed out, or failed): it leaves the line, and if it
-- was first while the lock is free, wakes the next, who would otherwise sleep until
-- its own next ask. Redisson's acquireFailed leaves the line without the wake-up.
-- KEYS[1]  the lock key
-- KEYS[2]  the line of waiters, KEYS[3] their deadlines (see fair_queue.lua)
-- KEYS[4]  the lock's pub/sub channel
-- ARGV[1]  the holder
-- Returns 1 if it was in line, 0 if not.
redis.call('zrem', KEYS[3], ARGV[1])
local was_first = redis.call('lindex', KEYS[2], 0) == ARGV[1]
if redis.call('lrem', KEYS[2], 1, ARGV[1]) == 0 then
    return 0
end
if was_first and redis.call('exists', KEYS[1]) == 0 then
    wake_first(KEYS[2], KEYS[4])
end
return 1
