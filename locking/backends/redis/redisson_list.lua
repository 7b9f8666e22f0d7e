-- List a process as waiting for the lock, once (see wake_one.lua).
-- KEYS[1]  the list of processes waiting for the lock
-- ARGV[1]  the process id
if not redis.call('lpos', KEYS[1], ARGV[1]) then
    redis.call('rpush', KEYS[1], ARGV[1])
end
