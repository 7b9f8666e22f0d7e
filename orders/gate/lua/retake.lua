-- Takes a late-paid order's units out of its sale again, once. An order whose units
-- were never given back here (the expirer's return not run yet) keeps them: it is
-- marked, and a return run later does nothing. The database's side follows
-- (payments.services): the order paid again and a sale row for its units.
-- KEYS[1]  the sale
-- KEYS[2]  the returns: order id -> "returned" or "retaken"
-- KEYS[3]  the units each buyer bought (the per-user limit)
-- ARGV[1]  the order id
-- ARGV[2]  its quantity
-- ARGV[3]  its buyer
-- ARGV[4]  the per-user limit (0: none)
-- Returns {"retaken", stock after, sale}; {"kept", -1, sale} (never given back);
-- {"already", -1, sale}; {"sold_out", stock, sale}; {"limit", bought, sale}; {"cold"}
-- when no sale is held; {"failover"} when it was opened on another server (a rebuild
-- is to replace it: nothing taken). ``sale``: the block of the sale held, which decided.
local sale = redis.call('HMGET', KEYS[1], 'stock', 'block', 'adopted', 'primary')
if not sale[1] then return {'cold'} end
if sale[4] and sale[4] ~= string.match(redis.call('INFO', 'server'), 'run_id:(%x+)') then
  return {'failover'}
end
local id, quantity, stock = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(sale[1])
local marker = redis.call('HGET', KEYS[2], ARGV[1])
if marker == 'retaken' then return {'already', -1, sale[2]} end
-- An order of this sale or of one it adopted (a rebuild) follows its marker: given
-- back here (or loaded with the stock, expired before the rebuild), or not yet. An
-- order of another sale: the sale held now was loaded from the database, which has
-- its units back, so they are taken from this one.
local block = math.floor(id / 33554432)
local ours = block == tonumber(sale[2]) or string.find(sale[3] or '', ' ' .. block .. ' ', 1, true)
local returned = marker == 'returned' or not ours
if not returned then
  redis.call('HSET', KEYS[2], ARGV[1], 'retaken')
  return {'kept', -1, sale[2]}
end
if stock < quantity then return {'sold_out', stock, sale[2]} end
local limit = tonumber(ARGV[4])
local bought = tonumber(redis.call('HGET', KEYS[3], ARGV[3]) or '0')
if limit > 0 and bought + quantity > limit then return {'limit', bought, sale[2]} end
redis.call('HSET', KEYS[2], ARGV[1], 'retaken')
redis.call('HSET', KEYS[1], 'stock', stock - quantity)
redis.call('HINCRBY', KEYS[1], 'retaken', quantity)
redis.call('HINCRBY', KEYS[3], ARGV[3], quantity)
return {'retaken', stock - quantity, sale[2]}
