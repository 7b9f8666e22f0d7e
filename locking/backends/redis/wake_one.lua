-- Prepended to the scripts of ``redisson`` that free the lock.
-- wake_one(waiting, channel_prefix, message): wake one waiter in all, not one per
-- process. ``waiting`` lists the processes that have a thread waiting for the lock,
-- each listening on a channel of its own (channel_prefix .. process id). The one
-- listed longest ago gets the message and moves to the end of the list, so the
-- wake-ups go round the processes. A listed process that nobody hears on (it died
-- waiting) is dropped and the next one tried. Returns 1 if someone was woken.
local function wake_one(waiting, channel_prefix, message)
    while true do
        local process = redis.call('lmove', waiting, waiting, 'left', 'right')
        if not process then
            return 0
        end
        if redis.call('publish', channel_prefix .. process, message) > 0 then
            return 1
        end
        redis.call('lrem', waiting, 0, process)
    end
end
