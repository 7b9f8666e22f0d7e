-- The gate's purchase, decided on the Redis server in one step: a replayed key's
-- first answer, the admission spent (a sale with a waiting room), the window, the
-- stock, the per-user limit, then the units taken and the order intent appended to
-- the stream. Every check comes before the first write, and the first is the
-- admission's spend or else XADD: a script that fails stops before its writes, after
-- the spend alone (the same key buys with it again), or after the stream has the intent.
-- KEYS[1]  the sale: hash of stock, loaded, base, accepted, opened, starts, ends, window, room
-- KEYS[2]  the replay records: Idempotency-Key -> "fingerprint order_id remaining quantity instance"
-- KEYS[3]  the orders: order id -> its stream entry id
-- KEYS[4]  the units each buyer bought (the per-user limit)
-- KEYS[5]  the stream of order intents
-- KEYS[6]  the dead letters (unused here: the sale's keys go together)
-- KEYS[7]  the returns (unused here)
-- KEYS[8..11] the sale's waiting room: its hash, active, admitted, used (for
--          admission_spend, which waitingroom/lua/spend.lua defines before this);
--          given with an admission only (ARGV[9])
-- ARGV[1]  the Idempotency-Key (or one made for this purchase when none was sent)
-- ARGV[2]  the request's fingerprint
-- ARGV[3]  the quantity
-- ARGV[4]  the buyer
-- ARGV[5]  the instance answering
-- ARGV[6]  the per-user limit (0: none)
-- ARGV[7]  "1" when the buyer sent the key (its answer is kept for replays)
-- ARGV[8]  "1" when the answer waits for replicas (a WAIT follows the script): every
--          answer then writes, so that the WAIT covers what it read as well (WAIT
--          waits for the connection's last write); a refusal rewrites the stock as is
-- ARGV[9]  the room's sale the buyer's admission names (its signature checked by
--          the caller), "" without one
-- ARGV[10] the request's name (X-Request-ID, "" without one), kept in the stream entry
-- ARGV[11] the run id of the server the connection reached ("" or not given: not
--          known, not checked)
-- Returns {"cold"} (nothing loaded), {"failover", primary} (the sale was opened or
-- reconciled on another server: what it holds here may be behind what was answered
-- there, so nothing is decided until the sale is reconciled), {"replay", record},
-- {"admission", why} (the sale has a waiting room, and the admission does not buy:
-- 'missing', or use.lua's refusal), {"not_started", starts_ms,
-- now_ms} or {"ended", ends_ms} (on Redis' clock), {"sold_out", stock},
-- {"limit", bought} or {"accepted", order_id, remaining}. A sold-out answer says whether
-- the sale has a payment window ("1"): its stock may come back.
local sale = redis.call('HMGET', KEYS[1], 'stock', 'accepted', 'base', 'starts', 'ends', 'primary', 'window',
                        'room')
if not sale[1] then return {'cold'} end
local server = ARGV[11] or ''
if sale[6] and server ~= '' and sale[6] ~= server then return {'failover', sale[6]} end
local function answer(reply)
  if ARGV[8] == '1' then redis.call('HSET', KEYS[1], 'stock', sale[1]) end
  return reply
end
local key, keyed = ARGV[1], ARGV[7] == '1'
if keyed then
  local record = redis.call('HGET', KEYS[2], key)
  if record then return answer({'replay', record}) end
end
if sale[8] == '1' then
  -- Spent here, before the window and the stock, as the other sellers spend it at
  -- the door: the same refusals, and the same purchase retried passes again.
  if ARGV[9] == '' then return answer({'admission', 'missing'}) end
  local spent = admission_spend(KEYS[8], KEYS[9], KEYS[10], KEYS[11], ARGV[4], ARGV[9], key)
  if spent == 'none' then spent = 'missing' end  -- the room lost: asking opens it again
  if spent ~= 'ok' then return answer({'admission', spent}) end
end
local starts, ends = tonumber(sale[4]), tonumber(sale[5])
if starts or ends then
  local t = redis.call('TIME')
  local now = t[1] * 1000 + math.floor(t[2] / 1000)
  if ends and (now >= ends or (starts and ends <= starts)) then return answer({'ended', ends}) end
  if starts and now < starts then return answer({'not_started', starts, now}) end
end
local quantity, stock = tonumber(ARGV[3]), tonumber(sale[1])
if stock < quantity then return answer({'sold_out', stock, sale[7] or '0'}) end
local limit = tonumber(ARGV[6])
if limit > 0 then
  local bought = tonumber(redis.call('HGET', KEYS[4], ARGV[4]) or '0')
  if bought + quantity > limit then return answer({'limit', bought}) end
end
local after = stock - quantity
-- Twice the units accepted before: stock may come back (an unpaid order expired), so
-- what was loaded less what is left would name a returned unit's order twice.
local order_id = string.format('%.0f', tonumber(sale[3]) + 2 * tonumber(sale[2]))
local entry = redis.call('XADD', KEYS[5], '*', 'order', order_id, 'key', key, 'user', ARGV[4],
  'quantity', quantity, 'before', stock, 'after', after, 'instance', ARGV[5], 'request', ARGV[10])
redis.call('HSET', KEYS[1], 'stock', after)
redis.call('HINCRBY', KEYS[1], 'accepted', quantity)
redis.call('HSET', KEYS[3], order_id, entry)
if limit > 0 then redis.call('HINCRBY', KEYS[4], ARGV[4], quantity) end
if keyed then
  redis.call('HSET', KEYS[2], key, table.concat({ARGV[2], order_id, after, quantity, ARGV[5]}, ' '))
end
return {'accepted', order_id, after}
