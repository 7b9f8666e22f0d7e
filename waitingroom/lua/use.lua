-- A purchase spends its buyer's admission: the slot frees, and the admission buys
-- nothing more. The same purchase retried (its idempotency key) passes again.
-- KEYS[1] the room   KEYS[2] active   KEYS[3] admitted   KEYS[4] used (hash: buyer -> key)
-- ARGV[1] the buyer   ARGV[2] the sale its token names   ARGV[3] the purchase's key
-- Returns 'ok', or why not: 'none' (no room), 'stale' (another sale's), 'not_admitted',
-- 'used' (by another purchase), 'expired'.
local sale = redis.call('HGET', KEYS[1], 'sale')
if not sale then
  return 'none'
end
if sale ~= ARGV[2] then
  return 'stale'
end
local used = redis.call('HGET', KEYS[4], ARGV[1])
if used then
  if used == ARGV[3] then
    return 'ok'
  end
  return 'used'
end
local ends = tonumber(redis.call('HGET', KEYS[3], ARGV[1]))
if not ends then
  return 'not_admitted'
end
local t = redis.call('TIME')
if tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) >= ends then
  return 'expired'
end
redis.call('HSET', KEYS[4], ARGV[1], ARGV[3])
redis.call('ZREM', KEYS[2], ARGV[1])
return 'ok'
