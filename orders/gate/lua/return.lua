-- Gives an order's units back to its sale, once: an expired order's (the marker in
-- the returns hash says it was done, or that a late payment took the units first,
-- which then never left), or a paid order's refunded at the provider. The database
-- already holds the order expired or refunded and the units back in its stock
-- (payments.expiry writes that first, then calls this).
-- KEYS[1]  the sale
-- KEYS[2]  the returns: order id -> "returned", "retaken" or "refunded"
-- KEYS[3]  the units each buyer bought (the per-user limit)
-- ARGV[1]  the order id
-- ARGV[2]  its quantity
-- ARGV[3]  its buyer
-- ARGV[4]  "refunded" for a paid order refunded (its units are out: never given back,
--          or taken again by a late payment), else (or not given) an expiry
-- Returns {"returned", stock after}; {"already", marker}; {"other"} when the order is
-- neither of the sale Redis holds nor of one it adopted (a rebuild adopts the sales
-- it replaces: an order of theirs that was pending then has its units given back
-- here; one that had expired was marked "returned" as its units were loaded);
-- {"cold"} when no sale is held; {"failover"} when the sale was opened on another
-- server (a restart, a promotion): a rebuild is to replace it, and the units are
-- owed to the sale it opens (they would go with this one).
local sale = redis.call('HMGET', KEYS[1], 'stock', 'block', 'adopted', 'primary')
if not sale[1] then return {'cold'} end
if sale[4] and sale[4] ~= string.match(redis.call('INFO', 'server'), 'run_id:(%x+)') then
  return {'failover'}
end
local id, quantity = tonumber(ARGV[1]), tonumber(ARGV[2])
local block = math.floor(id / 33554432)
if block ~= tonumber(sale[2]) and not string.find(sale[3] or '', ' ' .. block .. ' ', 1, true) then
  return {'other'}
end
local marker = redis.call('HGET', KEYS[2], ARGV[1])
local refund = ARGV[4] == 'refunded'
if marker and not (refund and marker == 'retaken') then return {'already', marker} end
redis.call('HSET', KEYS[2], ARGV[1], refund and 'refunded' or 'returned')
local after = tonumber(sale[1]) + quantity
redis.call('HSET', KEYS[1], 'stock', after)
redis.call('HINCRBY', KEYS[1], 'returned', quantity)
local bought = tonumber(redis.call('HGET', KEYS[3], ARGV[3]) or '0')
if bought >= quantity then redis.call('HINCRBY', KEYS[3], ARGV[3], -quantity) end
return {'returned', after}
