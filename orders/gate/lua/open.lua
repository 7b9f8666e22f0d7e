-- Opens a sale: drops whatever the product had, then makes its stream and group
-- and, last, its sale hash: purchases find the product cold until that exists.
-- KEYS[1..7]  the sale, replay records, orders, bought, stream, dead letters, returns
-- KEYS[8..10] the replay records, per-user counts and returns' markers to load,
--             written beforehand under names of this opening's own (any may not
--             exist, or not be given: none)
-- ARGV[1]  the stock loaded
-- ARGV[2]  the sale's first order id (its block, shifted)
-- ARGV[3]  when it opened (epoch seconds)
-- ARGV[4]  the sale's id (its block)
-- ARGV[5]  the persisters' consumer group
-- ARGV[6]  the window's start, epoch ms ("": none)
-- ARGV[7]  the window's end, epoch ms ("": none)
-- ARGV[8]  the sale it replaces (its block), or "" (or not given): whatever is there
-- ARGV[9]  "1" when the sale has a payment window (its units may come back), else "0"
-- ARGV[10] "1" when the sale has a waiting room (a purchase needs an admission), else "0"
-- ARGV[11] the sales whose orders it adopts (their blocks, each as " <block> "), or "":
--          their returns and late payments count in this one (return.lua, retake.lua)
-- The sale remembers this server's run id ("primary"): a purchase run on another
-- server (a replica promoted, this one restarted) is refused until it is reconciled.
-- Returns 1, or 0 when the product's sale is no longer the one it replaces (another
-- reconciliation came first): nothing is changed but the staged keys dropped.
local staged = {KEYS[8], KEYS[9], KEYS[10]}
if (ARGV[8] or '') ~= '' and redis.call('HGET', KEYS[1], 'block') ~= ARGV[8] then
  for _, key in pairs(staged) do redis.call('DEL', key) end
  return 0
end
redis.call('DEL', KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7])
if KEYS[8] and redis.call('EXISTS', KEYS[8]) == 1 then redis.call('RENAME', KEYS[8], KEYS[2]) end
if KEYS[9] and redis.call('EXISTS', KEYS[9]) == 1 then redis.call('RENAME', KEYS[9], KEYS[4]) end
if KEYS[10] and redis.call('EXISTS', KEYS[10]) == 1 then redis.call('RENAME', KEYS[10], KEYS[7]) end
redis.call('XGROUP', 'CREATE', KEYS[5], ARGV[5], '$', 'MKSTREAM')
local primary = string.match(redis.call('INFO', 'server'), 'run_id:(%x+)')
redis.call('HSET', KEYS[1], 'stock', ARGV[1], 'loaded', ARGV[1], 'base', ARGV[2], 'accepted', 0,
  'returned', 0, 'retaken', 0, 'window', ARGV[9] or '0', 'room', ARGV[10] or '0',
  'opened', ARGV[3], 'block', ARGV[4], 'starts', ARGV[6], 'ends', ARGV[7], 'primary', primary,
  'adopted', ARGV[11] or '')
return 1
