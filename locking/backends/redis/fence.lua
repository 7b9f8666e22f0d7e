-- Prepended to the acquire scripts that hand out fencing tokens.
-- next_fence(key): the next token for one lock name. A counter dies with a Redis
-- that lost its data (flushed, or started without it); one that INCR finds missing
-- (it answers 1) starts from the server's clock in microseconds instead, so tokens
-- keep growing across such a loss. Increments a crash loses with the counter kept
-- are not caught here: that takes appendfsync always (Redisson's FencedLock relies
-- on persistence too).
local function next_fence(key)
    local token = redis.call('incr', key)
    if token == 1 then
        local now = redis.call('time')
        token = now[1] .. string.format('%06d', tonumber(now[2]))
        redis.call('set', key, token)
    end
    return tonumber(token)
end
