-- What a process remembers of a sold-out sale.
-- KEYS[1]  the sale
-- KEYS[2]  its replay records
-- ARGV[1]  the sale's "opened" the caller knows ("": none)
-- ARGV[2]  the most keys the caller will hold
-- Returns {} (no sale), {stock} while it has some, else {0, opened, ms to the
-- window's end (-1: none), its keys}; the keys only when the caller does not know
-- this sale's and they are no more than ARGV[2] (else none: too many to hold).
local sale = redis.call('HMGET', KEYS[1], 'stock', 'opened', 'ends')
if not sale[1] then return {} end
if tonumber(sale[1]) > 0 then return {sale[1]} end
local left = -1
if sale[3] and sale[3] ~= '' then
  local t = redis.call('TIME')
  left = tonumber(sale[3]) - (t[1] * 1000 + math.floor(t[2] / 1000))
end
local reply = {'0', sale[2], left}
if sale[2] ~= ARGV[1] and redis.call('HLEN', KEYS[2]) <= tonumber(ARGV[2]) then
  reply[4] = redis.call('HKEYS', KEYS[2])
end
return reply
