-- Release one hold; at the last, free the lock and wake one waiter.
-- KEYS[1]  the lock key
-- KEYS[2]  the unlock latch (latch.lua)
-- KEYS[3]  the list of processes waiting for the lock (see wake_one.lua)
-- ARGV[1]  lease in milliseconds, reset while holds remain
-- ARGV[2]  the holder: "<client id>:<thread id>"
-- ARGV[3]  how long the latch is kept, in milliseconds
-- ARGV[4]  "1" when this is the retry after a lost reply
-- ARGV[5]  the waiting processes' channel prefix; ARGV[6] the message
-- ARGV[7]  "1" when the lease was given by the caller (no watchdog): see below
-- Returns nil if ARGV[2] does not hold the lock, 0 if holds remain, 1 if released.
local answered = latched(KEYS[2], ARGV[4])
if answered ~= nil then
    return answered
end
local value = redis.call('get', KEYS[1])
local count, holder = nil, nil
if value then
    count, holder = held_by(value)
end
if holder ~= ARGV[2] then
    return nil
end
if count > 1 then
    redis.call('set', KEYS[1], (count - 1) .. ':' .. holder, 'px', ARGV[1])
    latch(KEYS[2], 0, ARGV[3])
    return 0
end
-- The last hold: the lock itself becomes the latch, one RENAME for Redisson's DEL
-- and latch SET. It keeps the lease's remaining time, which under the watchdog is
-- at least two thirds of its timeout (20 s by default, past any retry); a lease the
-- caller gave may be nearly spent, so that latch gets its own time.
redis.call('rename', KEYS[1], KEYS[2])
if ARGV[7] == '1' then
    redis.call('pexpire', KEYS[2], ARGV[3])
end
wake_one(KEYS[3], ARGV[5], ARGV[6])
return 1
