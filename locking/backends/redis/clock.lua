-- Prepended to the scripts that keep deadlines: the server's clock in ms. Redisson
-- passes each client's clock instead, so two clients whose clocks disagree disagree
-- about who is stale; here one clock decides.
local function now_ms()
    local t = redis.call('time')
    return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
