-- Release one read or write hold of a read-write lock.
-- KEYS[1]  the lock (see rw_holds.lua), KEYS[2] the readers' leases
-- KEYS[3]  the lock's pub/sub channel
-- KEYS[4]  the unlock latch (see latch.lua)
-- ARGV[1]  "r" or "w": which of the holder's holds
-- ARGV[2]  the holder
-- ARGV[3]  lease in milliseconds
-- ARGV[4]  the message that wakes every waiter
-- ARGV[5]  how long the latch is kept, in milliseconds
-- ARGV[6]  "1" when this is the retry after a lost reply
-- Returns nil if the holder has no such hold, 0 if it holds the lock still (in this
-- mode or the other), 1 if it holds nothing of it any more.
local answered = latched(KEYS[4], ARGV[6])
if answered ~= nil then
    return answered
end
local now = now_ms()
drop_lapsed_readers(KEYS[1], KEYS[2], KEYS[3], ARGV[4], now)
local field = ARGV[1] .. ':' .. ARGV[2]
local count = redis.call('hincrby', KEYS[1], field, -1)
if count < 0 then
    redis.call('hdel', KEYS[1], field)  -- with it the key HINCRBY may have made
    return nil
end
local answer = 0
if count > 0 then
    if ARGV[1] == 'r' then
        redis.call('zadd', KEYS[2], now + tonumber(ARGV[3]), ARGV[2])
    end
    extend(KEYS[1], ARGV[3])
else
    redis.call('hdel', KEYS[1], field)
    if ARGV[1] == 'r' then
        redis.call('zrem', KEYS[2], ARGV[2])
    end
    local other = (ARGV[1] == 'r' and 'w:' or 'r:') .. ARGV[2]
    if redis.call('hexists', KEYS[1], other) == 0 then
        answer = 1
    end
    if redis.call('hlen', KEYS[1]) == 1 then  -- only "mode" is left: free
        redis.call('del', KEYS[1], KEYS[2])
        redis.call('publish', KEYS[3], ARGV[4])
    elseif ARGV[1] == 'w' then
        -- A writer that downgraded keeps its reads; other readers may join now.
        -- Redisson switches the mode without a message: its readers sleep on.
        redis.call('hset', KEYS[1], 'mode', 'read')
        redis.call('publish', KEYS[3], ARGV[4])
    end
end
latch(KEYS[4], answer, ARGV[5])
return answer
