-- Release one hold of a fair lock; at the last, wake the first in line only.
-- KEYS[1]  the lock key
-- KEYS[2]  the unlock latch (see give_back.lua)
-- KEYS[3]  the line of waiters, KEYS[4] their deadlines (see fair_queue.lua)
-- KEYS[5]  the lock's pub/sub channel
-- ARGV[1]  lease in milliseconds, reset while holds remain
-- ARGV[2]  the holder
-- ARGV[3]  how long the latch is kept, in milliseconds
-- ARGV[4]  "1" when this is the retry after a lost reply
-- Returns nil if ARGV[2] does not hold the lock, 0 if holds remain, 1 if released.
local answer, released = give_back(KEYS[1], KEYS[2], ARGV[2], ARGV[1], ARGV[3], ARGV[4])
if released then
    drop_stale(KEYS[3], KEYS[4], now_ms())
    wake_first(KEYS[3], KEYS[5])
end
return answer
