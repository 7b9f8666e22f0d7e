-- Take or re-enter a Redisson-style lock: a hash of holder -> hold count.
-- KEYS[1]  the lock key
-- KEYS[2]  the lock's fencing counter
-- ARGV[1]  lease in milliseconds
-- ARGV[2]  the holder: "<client id>:<thread id>"
-- ARGV[3]  "1" when the holder is waiting for it: it cannot be re-entering it then,
--          so a lock taken again before it asked costs two commands, not three
-- Returns {1, fencing token} when the lock is now held by ARGV[2] (count
-- incremented, lease reset; a re-entry keeps its holding's token); otherwise
-- {0, the lock's remaining time to live in ms}, which bounds how long a waiter
-- sleeps if the release message never comes.
-- Redisson asks EXISTS, then HEXISTS, then PTTL; PTTL first answers "free" (-2) and
-- the waiter's sleep in one command.
local ttl = redis.call('pttl', KEYS[1])
if ttl == -2 then
    return take(KEYS[1], KEYS[2], ARGV[2], ARGV[1])
end
if ARGV[3] ~= '1' and redis.call('hexists', KEYS[1], ARGV[2]) == 1 then
    return reenter(KEYS[1], KEYS[2], ARGV[2], ARGV[1])
end
return {0, ttl}
