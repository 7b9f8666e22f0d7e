-- Prepended to the scripts of ``redisson``'s string lock.
-- held_by(value): the hold count and the holder of a lock's value
-- "<count>:<holder>"; nil, nil for anything else (a key set by something else).
local function held_by(value)
    local count, holder = string.match(value, '^(%d+):(.+)$')
    return tonumber(count), holder
end
