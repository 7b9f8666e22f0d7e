-- A buyer asks the sale's waiting room for its place, and the room moves on.
-- The first ask takes a place (the next position); every later ask finds the same
-- one. Then admissions: the room's credit grows by ``rate`` a second (at most a
-- second's worth is kept), and each whole unit admits the next place in the queue
-- while fewer than ``active`` admissions are running. Each waiting buyer is told when
-- to ask again: a quarter of its wait at the room's rate, between ARGV[8] and ARGV[9] ms
-- (a million waiting, all asking every 2 s, would ask more than one Redis core answers). A place
-- whose holder is ``abandon_ms`` late for the ask it was told to make is skipped and
-- forgotten instead; an admission that ran out frees its slot. Nobody is admitted before the sale opens (``opens``): the
-- places taken before wait for it, in order, and the credit starts there. Redis's
-- clock is the room's: one clock for every instance.
-- KEYS[1] the room (hash: rate, active, admission_ms, abandon_ms, per_address,
--         sale, opens (ms), order ('fifo' or 'shuffled'), challenge_bits, next, credit, at)
-- KEYS[2] places (hash: buyer -> its position)
-- KEYS[3] the queue (zset: buyers waiting, by position; a place taken before the
--         opening of a shuffled room, by a random fraction below every position)
-- KEYS[4] asked (hash: buyer -> when its next ask is due, ms)
-- KEYS[5] active (zset: admitted buyers by their admission's end, ms; a purchase removes one)
-- KEYS[6] admitted (hash: buyer -> its admission's end, ms)
-- KEYS[7] addresses (hash: address -> places it took this sale)
-- KEYS[8] used (hash: buyer -> the purchase that spent its admission)
-- KEYS[9] origins (hash: buyer -> the address its place is counted against)
-- KEYS[10] the proof's mark (string, set once: a solution takes one place)
-- ARGV[1] the buyer   ARGV[2] its address ('' : not counted)   ARGV[3] '1': take a place if none
-- ARGV[4] most skips in one ask (bounds the script's time)
-- ARGV[5] a random fraction in [0, 1), the caller's: this place's turn, if it is taken
--         before the opening of a shuffled room
-- ARGV[6] the zero bits of the proof of work the caller checked (0: none shown); a
--         room with more challenge_bits takes no place without it
-- ARGV[7] seconds the proof's mark is kept (till the proof's end)
-- ARGV[8], ARGV[9] the least and the most ms a waiting buyer is told to wait before its next ask
-- Returns {state, position, ahead, admission's end ms, now ms, sale, rate, joined, admitted, skipped[,
-- again]} (joined, admitted, skipped: what this ask did: 1 if it took a place, and how many it
-- admitted and skipped; again, while waiting: the ms until this buyer's next ask), state one of
-- 'none' (no room), 'outside' (no place, none taken), 'bounded' (the address took its
-- places), 'challenge' (a new place costs more proof of work than shown), 'spent' (the proof
-- took a place before), 'waiting', 'admitted', 'expired' (an admission that ran out unused), 'used'
-- (spent by a purchase).
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local room = redis.call('HMGET', KEYS[1], 'rate', 'active', 'admission_ms', 'abandon_ms', 'per_address',
                        'sale', 'credit', 'at', 'opens', 'order', 'challenge_bits')
if not room[6] then
  return {'none', 0, 0, 0, now, '', 0, 0, 0, 0}
end
local rate, limit, admission = tonumber(room[1]), tonumber(room[2]), tonumber(room[3])
local abandon, per_address, sale = tonumber(room[4]), tonumber(room[5]), room[6]
local buyer = ARGV[1]

-- A place skipped, or an admission run out unused, gives its address's count back:
-- the next buyer behind that address (a NAT, an office) may take one. A place spent
-- by a purchase keeps it.
local function release(holder)
  local address = redis.call('HGET', KEYS[9], holder)
  if address then
    redis.call('HDEL', KEYS[9], holder)
    if redis.call('HINCRBY', KEYS[7], address, -1) <= 0 then
      redis.call('HDEL', KEYS[7], address)
    end
  end
end

local position = tonumber(redis.call('HGET', KEYS[2], buyer))
local ends = tonumber(redis.call('HGET', KEYS[6], buyer))
if ends and redis.call('HEXISTS', KEYS[8], buyer) == 1 then
  return {'used', position, 0, ends, now, sale, rate, 0, 0, 0}
end
if ends and ends <= now then
  -- Admitted, never used, run out: the place is gone; asking again queues anew.
  redis.call('ZREM', KEYS[5], buyer)
  redis.call('HDEL', KEYS[6], buyer)
  redis.call('HDEL', KEYS[2], buyer)
  release(buyer)
  if ARGV[3] ~= '1' then
    return {'expired', position, 0, ends, now, sale, rate, 0, 0, 0}
  end
  position, ends = nil, nil
end
local joined = 0
if not position then
  if ARGV[3] ~= '1' then
    return {'outside', 0, 0, 0, now, sale, rate, 0, 0, 0}
  end
  local counted = ARGV[2] ~= '' and per_address > 0
  if counted and tonumber(redis.call('HGET', KEYS[7], ARGV[2]) or 0) >= per_address then
    return {'bounded', 0, 0, 0, now, sale, rate, 0, 0, 0}
  end
  local bits = tonumber(room[11] or 0)
  if bits > 0 then
    if tonumber(ARGV[6]) < bits then
      return {'challenge', 0, 0, 0, now, sale, rate, 0, 0, 0}
    end
    if not redis.call('SET', KEYS[10], '1', 'NX', 'EX', ARGV[7]) then
      return {'spent', 0, 0, 0, now, sale, rate, 0, 0, 0}
    end
  end
  if counted then
    redis.call('HINCRBY', KEYS[7], ARGV[2], 1)
    redis.call('HSET', KEYS[9], buyer, ARGV[2])
  end
  position = redis.call('HINCRBY', KEYS[1], 'next', 1)
  redis.call('HSET', KEYS[2], buyer, position)
  local turn = position
  if room[10] == 'shuffled' and now < tonumber(room[9] or 0) then
    turn = tonumber(ARGV[5])  -- before every place taken after the opening
  end
  redis.call('ZADD', KEYS[3], turn, buyer)
  joined = 1
end
redis.call('HSET', KEYS[4], buyer, now)  -- here now (its next ask's due time is set below)

-- The room moves on, once the sale is open.
local admitted, skipped = 0, 0
local opens = tonumber(room[9] or 0)
if now >= opens then
  -- Admissions run out: their slots free, and their addresses' counts (unless a
  -- purchase spent one: a spend takes its buyer out of this set).
  for _, lapsed in ipairs(redis.call('ZRANGEBYSCORE', KEYS[5], '-inf', now)) do
    release(lapsed)
  end
  redis.call('ZREMRANGEBYSCORE', KEYS[5], '-inf', now)
  local since = math.max(tonumber(room[8] or opens), opens)
  local credit = tonumber(room[7] or 0) + math.max(now - since, 0) * rate / 1000
  credit = math.min(credit, math.max(rate, 1))
  local free = limit - redis.call('ZCARD', KEYS[5])
  local skips = tonumber(ARGV[4])
  while credit >= 1 and free > 0 and skips > 0 do
    local head = redis.call('ZRANGE', KEYS[3], 0, 0)
    if #head == 0 then
      break
    end
    local next = head[1]
    redis.call('ZREM', KEYS[3], next)
    if now - tonumber(redis.call('HGET', KEYS[4], next) or 0) > abandon then  -- that late for its ask
      redis.call('HDEL', KEYS[2], next)  -- nobody asks for it: skipped, and forgotten
      redis.call('HDEL', KEYS[4], next)
      release(next)
      skips = skips - 1
      skipped = skipped + 1
    else
      redis.call('ZADD', KEYS[5], now + admission, next)
      redis.call('HSET', KEYS[6], next, now + admission)
      credit = credit - 1
      free = free - 1
      admitted = admitted + 1
    end
  end
  redis.call('HSET', KEYS[1], 'credit', tostring(credit), 'at', now)
end

ends = tonumber(redis.call('HGET', KEYS[6], buyer))
if ends then
  return {'admitted', position, 0, ends, now, sale, rate, joined, admitted, skipped}
end
local turn = redis.call('ZSCORE', KEYS[3], buyer) or position
local ahead = redis.call('ZCOUNT', KEYS[3], '-inf', '(' .. turn)
local least, most = tonumber(ARGV[8]), tonumber(ARGV[9])
local again = least
if rate > 0 then
  again = math.min(math.max(math.floor(ahead * 250 / rate), least), most)
end
redis.call('HSET', KEYS[4], buyer, now + again)
return {'waiting', position, ahead, 0, now, sale, rate, joined, admitted, skipped, again}
