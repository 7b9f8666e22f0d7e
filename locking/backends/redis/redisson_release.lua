-- Release one hold; at the last, delete the lock and wake the waiters.
-- KEYS[1]  the lock key
-- KEYS[2]  the lock's pub/sub channel
-- KEYS[3]  the unlock latch: one key per release request, so a release retried
--          after a lost reply returns the first answer instead of releasing twice
-- ARGV[1]  the message published on the channel
-- ARGV[2]  lease in milliseconds, reset while holds remain
-- ARGV[3]  the holder: "<client id>:<thread id>"
-- ARGV[4]  how long the latch is kept, in milliseconds
-- ARGV[5]  "1" when this is the retry: only then can the latch hold an answer
-- Returns nil if ARGV[3] does not hold the lock, 0 if holds remain, 1 if released.
if ARGV[5] == '1' then
    local answered = redis.call('get', KEYS[3])
    if answered ~= false then
        return tonumber(answered)
    end
end
-- One HINCRBY both asks and decrements (Redisson: HEXISTS, then HINCRBY). Below
-- zero, ARGV[3] was no holder: take back the field it made (and with the last
-- field gone, Redis drops the key it may have made).
local count = redis.call('hincrby', KEYS[1], ARGV[3], -1)
if count < 0 then
    redis.call('hdel', KEYS[1], ARGV[3])
    return nil
end
if count > 0 then
    redis.call('pexpire', KEYS[1], ARGV[2])
    redis.call('set', KEYS[3], 0, 'px', ARGV[4])
    return 0
end
redis.call('del', KEYS[1])
redis.call('publish', KEYS[2], ARGV[1])
redis.call('set', KEYS[3], 1, 'px', ARGV[4])
return 1
