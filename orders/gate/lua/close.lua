-- Drops a product's sale.
-- KEYS     every key of the product's sale
-- Returns the stock it had (nil: none).
local stock = redis.call('HGET', KEYS[1], 'stock')
redis.call('DEL', unpack(KEYS))
return stock
