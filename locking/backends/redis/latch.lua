-- Prepended to the release scripts: the unlock latch, one key per release request,
-- answers a retry after a lost reply as the first attempt was answered instead of
-- releasing twice.

-- latched(latch, retry): the first attempt's answer, or nil. ``retry`` is "1" for
-- the retry, the only attempt that can find an answer in it. A latch that is not a
-- number is a lock renamed into it by its last release (``redisson``): 1, released.
local function latched(latch, retry)
    if retry ~= '1' then
        return nil
    end
    local answered = redis.call('get', latch)
    if answered == false then
        return nil
    end
    return tonumber(answered) or 1
end

-- latch(latch, answer, latch_ms): keep this attempt's answer for its retry.
local function latch(latch, answer, latch_ms)
    redis.call('set', latch, answer, 'px', latch_ms)
end
