-- The watchdog's renewal of a read-write lock's holder, in whichever modes it holds.
-- KEYS[1]  the lock (see rw_holds.lua), KEYS[2] the readers' leases
-- KEYS[3]  the lock's pub/sub channel
-- ARGV[1]  lease in milliseconds
-- ARGV[2]  the holder
-- ARGV[3]  the message that wakes every waiter
-- Returns 1 if renewed, 0 if the holder holds nothing (a lapsed lease is not revived).
local now = now_ms()
drop_lapsed_readers(KEYS[1], KEYS[2], KEYS[3], ARGV[3], now)
local reads = redis.call('hexists', KEYS[1], 'r:' .. ARGV[2]) == 1
if not reads and redis.call('hexists', KEYS[1], 'w:' .. ARGV[2]) == 0 then
    return 0
end
if reads then
    redis.call('zadd', KEYS[2], now + tonumber(ARGV[1]), ARGV[2])
    extend(KEYS[2], ARGV[1])
end
extend(KEYS[1], ARGV[1])
return 1
