-- Release one hold; at the last, delete the lock and wake the waiters.
-- KEYS[1]  the lock key
-- KEYS[2]  the lock's pub/sub channel
-- KEYS[3]  the unlock latch (see give_back.lua)
-- ARGV[1]  the message published on the channel
-- ARGV[2]  lease in milliseconds, reset while holds remain
-- ARGV[3]  the holder: "<client id>:<thread id>"
-- ARGV[4]  how long the latch is kept, in milliseconds
-- ARGV[5]  "1" when this is the retry after a lost reply
-- Returns nil if ARGV[3] does not hold the lock, 0 if holds remain, 1 if released.
local answer, released = give_back(KEYS[1], KEYS[3], ARGV[3], ARGV[2], ARGV[4], ARGV[5])
if released then
    redis.call('publish', KEYS[2], ARGV[1])
end
return answer
