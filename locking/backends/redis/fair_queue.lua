-- Prepended to the fair lock's scripts: the line of waiters is a list of holders,
-- first come first, beside their deadlines, a sorted set of holder -> the server
-- time in ms by which it must ask again.

-- Drop every waiter that stopped asking (it died, or gave up without leaving).
-- Redisson drops them from the head only; anywhere costs the same one ZRANGEBYSCORE
-- when nobody is stale, and a dead waiter in the middle would otherwise be woken
-- when its turn comes and hold the line for its whole timeout.
-- Returns whether it dropped anyone.
local function drop_stale(line, deadlines, now)
    local stale = redis.call('zrangebyscore', deadlines, '-inf', now)
    if #stale == 0 then
        return false
    end
    for _, waiter in ipairs(stale) do
        redis.call('lrem', line, 1, waiter)
    end
    redis.call('zremrangebyscore', deadlines, '-inf', now)
    return true
end

-- Wake the first in line, if anyone waits. The message names it: only that waiter
-- wakes (Redisson publishes on a channel per waiter instead, one subscription each).
local function wake_first(line, channel)
    local first = redis.call('lindex', line, 0)
    if first ~= false then
        redis.call('publish', channel, first)
    end
end
