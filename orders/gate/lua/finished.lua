-- Whether a sale's stream is done: nothing more can come (sold out, or past the
-- window's end on Redis' clock) and everything in it was delivered to the
-- persisters' group and acknowledged. A sale with a payment window is never done
-- by selling out: an unpaid order's units come back and sell again.
-- KEYS[1]  the sale
-- KEYS[2]  its stream
-- ARGV[1]  the persisters' consumer group
-- Returns the sale's id when done; "" when neither the sale nor its stream is there
-- (Redis lost them: nothing to read); nil otherwise.
local sale = redis.call('HMGET', KEYS[1], 'block', 'stock', 'ends', 'window')
local stream = redis.call('EXISTS', KEYS[2]) == 1
if not sale[1] then
  if stream then return nil end
  return ''
end
if not stream then return nil end
if tonumber(sale[2]) > 0 or sale[4] == '1' then
  local ends = tonumber(sale[3])
  if not ends then return nil end
  local t = redis.call('TIME')
  if t[1] * 1000 + math.floor(t[2] / 1000) < ends then return nil end
end
local last = redis.call('XREVRANGE', KEYS[2], '+', '-', 'COUNT', 1)
for _, group in ipairs(redis.call('XINFO', 'GROUPS', KEYS[2])) do
  local info = {}
  for i = 1, #group, 2 do info[group[i]] = group[i + 1] end
  if info['name'] == ARGV[1] then
    if info['pending'] ~= 0 then return nil end
    if #last > 0 and info['last-delivered-id'] ~= last[1][1] then return nil end
    return sale[1]
  end
end
return nil
