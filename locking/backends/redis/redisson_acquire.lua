-- Take or re-enter a Redisson-style lock. The lock is a string "<count>:<holder>"
-- with the lease as its TTL (Redisson keeps a hash {holder: count} and asks EXISTS,
-- HEXISTS, PTTL, then HINCRBY and PEXPIRE). One SET NX PX GET takes a free lock with
-- its lease, or answers who holds it: a taken lock costs one command, not three.
-- KEYS[1]  the lock key
-- KEYS[2]  the lock's fencing counter
-- ARGV[1]  lease in milliseconds
-- ARGV[2]  the holder: "<client id>:<thread id>"
-- Returns {1, fencing token} when the lock is now held by ARGV[2] (count
-- incremented, lease reset; a re-entry keeps its holding's token); otherwise
-- {0, the lock's remaining time to live in ms}, which bounds how long a waiter
-- sleeps if no wake-up comes.
local held = redis.call('set', KEYS[1], '1:' .. ARGV[2], 'nx', 'px', ARGV[1], 'get')
if not held then
    return {1, next_fence(KEYS[2])}
end
local count, holder = held_by(held)
if holder == ARGV[2] then
    redis.call('set', KEYS[1], (count + 1) .. ':' .. holder, 'px', ARGV[1])
    -- Held all along by this holder: no one has taken a token since (a counter
    -- flushed meanwhile starts again from the clock).
    return {1, tonumber(redis.call('get', KEYS[2]) or next_fence(KEYS[2]))}
end
return {0, redis.call('pttl', KEYS[1])}
