-- Release one hold; at the last, delete the lock and wake the waiters.
-- KEYS[1]  the lock key
-- KEYS[2]  the lock's pub/sub channel
-- KEYS[3]  the unlock latch: one key per release request, so a release retried
--          after a lost reply returns the first answer instead of releasing twice
-- ARGV[1]  the message published on the channel
-- ARGV[2]  lease in milliseconds, reset while holds remain
-- ARGV[3]  the holder: "<client id>:<thread id>"
-- ARGV[4]  how long the latch is kept, in milliseconds
-- Returns nil if ARGV[3] does not hold the lock, 0 if holds remain, 1 if released.
local answered = redis.call('get', KEYS[3])
if answered ~= false then
    return tonumber(answered)
end
if redis.call('hexists', KEYS[1], ARGV[3]) == 0 then
    return nil
end
local count = redis.call('hincrby', KEYS[1], ARGV[3], -1)
if count > 0 then
    redis.call('pexpire', KEYS[1], ARGV[2])
    redis.call('set', KEYS[3], 0, 'px', ARGV[4])
    return 0
end
redis.call('del', KEYS[1])
redis.call('publish', KEYS[2], ARGV[1])
redis.call('set', KEYS[3], 1, 'px', ARGV[4])
return 1
