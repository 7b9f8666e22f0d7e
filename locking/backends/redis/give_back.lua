-- Prepended (after latch.lua) to the fair lock's release script (a hash lock).
-- give_back(lock, latch, holder, lease_ms, latch_ms, retry): give back one hold of
-- ``holder``. Returns the script's answer (nil: not a holder; 0: holds remain; 1:
-- released) and whether the lock was released, so that its caller wakes whoever it
-- wakes.
local function give_back(lock, latch_key, holder, lease_ms, latch_ms, retry)
    local answered = latched(latch_key, retry)
    if answered ~= nil then
        return answered, false
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
        latch(latch_key, 0, latch_ms)
        return 0, false
    end
    redis.call('del', lock)
    latch(latch_key, 1, latch_ms)
    return 1, true
end
