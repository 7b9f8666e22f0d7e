-- Prepended to the acquire scripts that hand out fencing tokens.
-- next_fence(key): the next token for one lock name. A counter dies with a Redis
-- that does not persist; seeding it from the server's clock in microseconds keeps
-- tokens growing across such a restart (Redisson's FencedLock relies on persistence).
local function next_fence(key)
    if redis.call('exists', key) == 0 then
        local now = redis.call('time')
        redis.call('set', key, now[1] .. string.format('%06d', tonumber(now[2])))
    end
    return redis.call('incr', key)
end
