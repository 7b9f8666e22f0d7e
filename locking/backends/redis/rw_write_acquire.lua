-- Take or re-enter the write lock of a read-write lock.
-- KEYS[1]  the lock (see rw_holds.lua), KEYS[2] the readers' leases
-- KEYS[3]  the waiting writers: a sorted set of holder -> deadline
-- KEYS[4]  the lock's pub/sub channel
-- ARGV[1]  lease in milliseconds
-- ARGV[2]  the holder
-- ARGV[3]  the message that wakes every waiter
-- ARGV[4]  how long a waiting writer's mark lasts without being renewed, in ms
-- ARGV[5]  "1": mark this writer as waiting when it is not taken (a blocking acquire)
-- Returns {1, nil} when taken, {-1, nil} when the holder holds the read lock only (an
-- upgrade: refused), otherwise {0, the lock's remaining time to live in ms}.
local now = now_ms()
drop_lapsed_readers(KEYS[1], KEYS[2], KEYS[4], ARGV[3], now)
local mode = redis.call('hget', KEYS[1], 'mode')
local mine = 'w:' .. ARGV[2]
if mode == false then
    redis.call('hset', KEYS[1], 'mode', 'write', mine, 1)
    redis.call('pexpire', KEYS[1], ARGV[1])
    redis.call('zrem', KEYS[3], ARGV[2])
    return {1, false}
end
if redis.call('hexists', KEYS[1], mine) == 1 then
    redis.call('hincrby', KEYS[1], mine, 1)
    extend(KEYS[1], ARGV[1])
    return {1, false}
end
-- Redisson queues this writer behind the readers, itself among them: it waits for
-- its own read hold, forever. Refused instead.
if redis.call('hexists', KEYS[1], 'r:' .. ARGV[2]) == 1 then
    return {-1, false}
end
if ARGV[5] == '1' then
    redis.call('zadd', KEYS[3], now + tonumber(ARGV[4]), ARGV[2])
    redis.call('pexpire', KEYS[3], ARGV[4])
end
return {0, redis.call('pttl', KEYS[1])}
