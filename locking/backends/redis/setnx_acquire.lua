-- Take a SET NX lock and hand out its fencing token, in one step.
-- KEYS[1]  the lock key
-- KEYS[2]  the lock's fencing counter
-- ARGV[1]  the holder's token
-- ARGV[2]  lease in milliseconds
-- Returns the fencing token if taken, nil if the lock is held.
if redis.call('set', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
    return next_fence(KEYS[2])
end
return nil
