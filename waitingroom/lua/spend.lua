-- A purchase spends its buyer's admission: the slot frees, and the admission buys
-- nothing more; the same purchase retried (its key) passes again. A function, put
-- before use.lua and the gate's sale script (orders/gate/lua/sell.lua): one spend
-- for every seller.
-- room, active, admitted, used: the room's keys (hash; zset of admissions running;
-- hash buyer -> its admission's end, ms; hash buyer -> the purchase that spent it)
-- Returns 'ok', or why not: 'none' (no room), 'stale' (another sale's), 'not_admitted',
-- 'used' (by another purchase), 'expired'.
local function admission_spend(room, active, admitted, used, buyer, sale, key)
  local current = redis.call('HGET', room, 'sale')
  if not current then
    return 'none'
  end
  if current ~= sale then
    return 'stale'
  end
  local spent = redis.call('HGET', used, buyer)
  if spent then
    if spent == key then
      return 'ok'
    end
    return 'used'
  end
  local ends = tonumber(redis.call('HGET', admitted, buyer))
  if not ends then
    return 'not_admitted'
  end
  local t = redis.call('TIME')
  if tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) >= ends then
    return 'expired'
  end
  redis.call('HSET', used, buyer, key)
  redis.call('ZREM', active, buyer)
  return 'ok'
end
