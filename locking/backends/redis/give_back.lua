-- Prepended to the release scripts of the reentrant hash locks (redisson, fair).
-- give_back(lock, latch, holder, lease_ms, latch_ms, retry): give back one hold of
-- ``holder``. Returns the script's answer (nil: not a holder; 0: holds remain; 1:
-- released) and whether the lock was released, so that its caller wakes whoever it
-- wakes. The latch, one key per release request, answers a retry after a lost reply
-- as the first attempt was answered instead of releasing twice; ``retry`` is "1" for
-- that retry, the only attempt that can find an answer in it.
local function give_back(lock, latch, holder, lease_ms, latch_ms, retry)
    if retry == '1' then
        local answered = redis.call('get', latch)
        if answered ~= false then
            return tonumber(answered), false
        end
    end
    -- One HINCRBY both asks and decrements (Redisson: HEXISTS, then HINCRBY). Below
    -- zero, ``holder`` held nothing: take back the field it made (and with the last
    -- field gone, Redis drops the key it may have made).
    local count = redis.call('hincrby', lock, holder, -1)
    if count < 0 then
        redis.call('hdel', lock, holder)
        return nil, false
    end
    if count > 0 then
        redis.call('pexpire', lock, lease_ms)
        redis.call('set', latch, 0, 'px', latch_ms)
        return 0, false
    end
    redis.call('del', lock)
    redis.call('set', latch, 1, 'px', latch_ms)
    return 1, true
end
