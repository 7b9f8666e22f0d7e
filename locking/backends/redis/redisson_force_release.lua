-- Delete the lock whoever holds it, and wake one waiter.
-- KEYS[1]  the lock key
-- KEYS[2]  the list of processes waiting for it
-- ARGV[1]  the waiting processes' channel prefix; ARGV[2] the message
-- Returns 1 if a lock was deleted, 0 if it was free.
if redis.call('del', KEYS[1]) == 1 then
    wake_one(KEYS[2], ARGV[1], ARGV[2])
    return 1
end
return 0
