-- Take or re-enter a Redisson-style lock: a hash of holder -> hold count.
-- KEYS[1]  the lock key
-- ARGV[1]  lease in milliseconds
-- ARGV[2]  the holder: "<client id>:<thread id>"
-- Returns nil when the lock is now held by ARGV[2] (count incremented, lease
-- reset); otherwise the lock's remaining time to live in ms, which bounds how
-- long a waiter sleeps if the release message never comes.
if (redis.call('exists', KEYS[1]) == 0) or (redis.call('hexists', KEYS[1], ARGV[2]) == 1) then
    redis.call('hincrby', KEYS[1], ARGV[2], 1)
    redis.call('pexpire', KEYS[1], ARGV[1])
    return nil
end
return redis.call('pttl', KEYS[1])
