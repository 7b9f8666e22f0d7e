-- Prepended (after clock.lua) to the read-write lock's scripts. The lock is a hash:
-- "mode" ("read" or "write"), and per holder "r:<holder>" and "w:<holder>", its read
-- and write hold counts. Beside it, the readers' leases: a sorted set of holder ->
-- the server time in ms when its read holds lapse unless renewed.

-- extend(key, ms): the key lives at least ``ms`` more (never shortened: another
-- holder's lease may be longer).
local function extend(key, ms)
    if redis.call('pttl', key) < tonumber(ms) then
        redis.call('pexpire', key, ms)
    end
end

-- drop_lapsed_readers(lock, readers, channel, everyone, now): forget the read holds
-- of every reader whose lease lapsed (its process died: nothing renewed it). Redisson
-- keeps one key with a TTL per read hold and scans them all at each release; one
-- sorted set answers "who lapsed?" in one command. Wakes every waiter if that freed
-- the lock.
local function drop_lapsed_readers(lock, readers, channel, everyone, now)
    local lapsed = redis.call('zrangebyscore', readers, '-inf', now)
    if #lapsed == 0 then
        return
    end
    for _, reader in ipairs(lapsed) do
        redis.call('hdel', lock, 'r:' .. reader)
    end
    redis.call('zremrangebyscore', readers, '-inf', now)
    if redis.call('hlen', lock) == 1 then  -- only "mode" is left
        redis.call('del', lock)
        redis.call('publish', channel, everyone)
    end
end
