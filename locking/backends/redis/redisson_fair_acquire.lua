-- Take a fair Redisson-style lock, re-enter it, or wait in line for it.
-- KEYS[1]  the lock key (a hash of holder -> hold count, as redisson_acquire)
-- KEYS[2]  the lock's fencing counter
-- KEYS[3]  the line of waiters, KEYS[4] their deadlines (see fair_queue.lua)
-- KEYS[5]  the lock's pub/sub channel
-- ARGV[1]  lease in milliseconds
-- ARGV[2]  the holder: "<client id>:<thread id>"
-- ARGV[3]  how long a waiter stays in line without asking again, in milliseconds
-- ARGV[4]  "1": join the line when not taken (a blocking acquire); "0": only try
-- Returns {1, fencing token} when taken or re-entered; otherwise {0, the lock's
-- remaining time to live in ms (-2 when free: someone else's turn)}.
local now = now_ms()
local dropped = drop_stale(KEYS[3], KEYS[4], now)
if redis.call('hexists', KEYS[1], ARGV[2]) == 1 then
    return reenter(KEYS[1], KEYS[2], ARGV[2], ARGV[1])
end
local head = redis.call('lindex', KEYS[3], 0)
if redis.call('exists', KEYS[1]) == 0 then
    -- Free: it goes to the first in line, or to anyone when nobody waits.
    if head == false or head == ARGV[2] then
        if head ~= false then
            redis.call('lpop', KEYS[3])
            redis.call('zrem', KEYS[4], ARGV[2])
        end
        return take(KEYS[1], KEYS[2], ARGV[2], ARGV[1])
    end
    -- Free, and someone else's turn. If that is so because stale waiters were just
    -- dropped, the release's message named one of them: tell the new first.
    if dropped then
        redis.call('publish', KEYS[5], head)
    end
end
if ARGV[4] == '1' then
    -- Asking again keeps a waiter's place: ZADD answers 1 only for a new member.
    if redis.call('zadd', KEYS[4], now + tonumber(ARGV[3]), ARGV[2]) == 1 then
        redis.call('rpush', KEYS[3], ARGV[2])
    end
end
return {0, redis.call('pttl', KEYS[1])}
