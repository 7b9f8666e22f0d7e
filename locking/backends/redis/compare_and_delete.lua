-- Release a SET NX lock only if this holder still owns it.
-- KEYS[1]  the lock key
-- ARGV[1]  the holder's token
-- Returns 1 if deleted, 0 if the key is gone or holds another holder's token.
if redis.call('get', KEYS[1]) == ARGV[1] then
    return redis.call('del', KEYS[1])
end
return 0
