-- Take or re-enter the read lock of a read-write lock.
-- KEYS[1]  the lock (see rw_holds.lua), KEYS[2] the readers' leases
-- KEYS[3]  the waiting writers: a sorted set of holder -> deadline
-- KEYS[4]  the lock's pub/sub channel
-- ARGV[1]  lease in milliseconds
-- ARGV[2]  the holder
-- ARGV[3]  the message that wakes every waiter
-- ARGV[4]  how long a waiting writer's mark lasts without being renewed, in ms
-- Returns {1, nil} when taken; otherwise {0, how long to sleep at most, in ms}.
local now = now_ms()
drop_lapsed_readers(KEYS[1], KEYS[2], KEYS[4], ARGV[3], now)
local mode = redis.call('hget', KEYS[1], 'mode')
local mine = 'r:' .. ARGV[2]
-- Shared with other readers; the write holder may take it too (a downgrade). A
-- re-entry never waits: the writer that waits is waiting for this very reader.
local allowed = mode == false or mode == 'read'
    or redis.call('hexists', KEYS[1], 'w:' .. ARGV[2]) == 1
if allowed and redis.call('hexists', KEYS[1], mine) == 0 and mode ~= 'write' then
    -- A new reader waits behind a waiting writer, or a steady crowd of readers
    -- would keep every writer out (Redisson lets it in; Java's ReentrantReadWriteLock
    -- does not).
    redis.call('zremrangebyscore', KEYS[3], '-inf', now)
    if redis.call('zcard', KEYS[3]) > 0 then
        local ttl = redis.call('pttl', KEYS[1])
        if ttl < 0 or ttl > tonumber(ARGV[4]) then
            ttl = tonumber(ARGV[4])
        end
        return {0, ttl}
    end
end
if not allowed then
    return {0, redis.call('pttl', KEYS[1])}
end
if mode == false then
    redis.call('hset', KEYS[1], 'mode', 'read')
end
redis.call('hincrby', KEYS[1], mine, 1)
redis.call('zadd', KEYS[2], now + tonumber(ARGV[1]), ARGV[2])
extend(KEYS[1], ARGV[1])
extend(KEYS[2], ARGV[1])
return {1, false}
