-- Pass on a wake-up that reached a process with nobody left waiting (its last
-- waiter gave up as the message came), if the lock is free: otherwise its holder's
-- release will wake someone.
-- KEYS[1]  the lock key
-- KEYS[2]  the list of processes waiting for it
-- ARGV[1]  the waiting processes' channel prefix; ARGV[2] the message
if redis.call('exists', KEYS[1]) == 0 then
    return wake_one(KEYS[2], ARGV[1], ARGV[2])
end
return 0
