-- Copies an entry to the dead-letter stream and marks its order dead, once: a
-- persister that dies between this and its XACK leaves the entry to be read again.
-- KEYS[1]  the sale's orders: order id -> its stream entry id ("dead <id>" once dead)
-- KEYS[2]  the sale's dead letters
-- ARGV[1]  the order id
-- ARGV[2]  the stream entry id
-- ARGV[3]  why the database refused it
-- ARGV[4..]  the entry's fields, name then value
-- Returns 1 when copied, 0 when the order was dead already.
local marked = redis.call('HGET', KEYS[1], ARGV[1])
if marked and string.sub(marked, 1, 5) == 'dead ' then return 0 end
redis.call('XADD', KEYS[2], '*', 'entry', ARGV[2], 'order', ARGV[1], 'reason', ARGV[3], unpack(ARGV, 4))
redis.call('HSET', KEYS[1], ARGV[1], 'dead ' .. ARGV[2])
return 1
