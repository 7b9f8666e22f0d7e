-- Opens a sale: drops whatever the product had, then makes its stream and group
-- and, last, its sale hash: purchases find the product cold until that exists.
-- KEYS[1..6]  the sale, replay records, orders, bought, stream, dead letters
-- ARGV[1]  the stock loaded
-- ARGV[2]  the sale's first order id (its block, shifted)
-- ARGV[3]  when it opened (epoch seconds)
-- ARGV[4]  the sale's id (its block)
-- ARGV[5]  the persisters' consumer group
-- ARGV[6]  the window's start, epoch ms ("": none)
-- ARGV[7]  the window's end, epoch ms ("": none)
-- Returns 1.
redis.call('DEL', KEYS[1], KEYS[3], KEYS[5], KEYS[6])
redis.call('XGROUP', 'CREATE', KEYS[5], ARGV[5], '$', 'MKSTREAM')
redis.call('HSET', KEYS[1], 'stock', ARGV[1], 'loaded', ARGV[1], 'base', ARGV[2], 'accepted', 0,
  'opened', ARGV[3], 'block', ARGV[4], 'starts', ARGV[6], 'ends', ARGV[7])
return 1
