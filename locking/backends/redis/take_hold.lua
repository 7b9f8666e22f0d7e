-- Prepended (after fence.lua) to the fair lock's acquire script: its lock is
-- Redisson's hash of holder -> hold count.

-- take(lock, fence, holder, lease_ms): the lock is free; ``holder`` takes it.
-- Returns {1, a new fencing token}.
local function take(lock, fence, holder, lease_ms)
    redis.call('hset', lock, holder, 1)
    redis.call('pexpire', lock, lease_ms)
    return {1, next_fence(fence)}
end

-- reenter(lock, fence, holder, lease_ms): ``holder`` holds it already; one hold more.
-- Returns {1, the holding's fencing token}: held all along by this holder, no one has
-- taken a token since (a counter flushed meanwhile starts again from the clock).
local function reenter(lock, fence, holder, lease_ms)
    redis.call('hincrby', lock, holder, 1)
    redis.call('pexpire', lock, lease_ms)
    return {1, tonumber(redis.call('get', fence) or next_fence(fence))}
end
