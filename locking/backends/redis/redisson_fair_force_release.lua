-- Delete a fair lock whoever holds it, and wake the first in line.
-- KEYS[1]  the lock key
-- KEYS[2]  the line of waiters, KEYS[3] their deadlines (see fair_queue.lua)
-- KEYS[4]  the lock's pub/sub channel
-- Returns 1 if a lock was deleted, 0 if it was free.
if redis.call('del', KEYS[1]) == 0 then
    return 0
end
drop_stale(KEYS[2], KEYS[3], now_ms())
wake_first(KEYS[2], KEYS[4])
return 1
