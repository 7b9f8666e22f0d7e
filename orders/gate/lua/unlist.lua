-- Takes a product off the persisters' list, only if the list still names the sale
-- found finished: a reset since listed a new one.
-- KEYS[1]  the persisters' list: sku -> sale id
-- ARGV[1]  the sku
-- ARGV[2]  the sale found finished
-- Returns 1 when taken off, 0 otherwise.
if redis.call('HGET', KEYS[1], ARGV[1]) ~= ARGV[2] then return 0 end
return redis.call('HDEL', KEYS[1], ARGV[1])
