-- Release one hold of a fair lock; at the last, wake the first in line only.
-- KEYS[1]  the lock key
-- KEYS[2]  the unlock latch (see redisson_release.lua)
-- KEYS[3]  the line of waiters, KEYS[4] their deadlines (see fair_queue.lua)
-- KEYS[5]  the lock's pub/sub channel
-- ARGV[1]  lease in milliseconds, reset while holds remain
-- ARGV[2]  the holder
-- ARGV[3]  how long the latch is kept, in milliseconds
-- Returns nil if ARGV[2] does not hold the lock, 0 if holds remain, 1 if released.
local answered = redis.call('get', KEYS[2])
if answered ~= false then
    return tonumber(answered)
end
if redis.call('hexists', KEYS[1], ARGV[2]) == 0 then
    return nil
end
local count = redis.call('hincrby', KEYS[1], ARGV[2], -1)
if count > 0 then
    redis.call('pexpire', KEYS[1], ARGV[1])
    redis.call('set', KEYS[2], 0, 'px', ARGV[3])
    return 0
end
redis.call('del', KEYS[1])
drop_stale(KEYS[3], KEYS[4], now_ms())
wake_first(KEYS[3], KEYS[5])
redis.call('set', KEYS[2], 1, 'px', ARGV[3])
return 1
