"""The gate's room: a sale decided in Redis and written to the database afterwards.

- ``sale``: the overview (start there), a sale's opening, closing and tally;
- ``sell``: one purchase, the sale's script, and the sold-out memory;
- ``pipeline``: the scripts of the purchases a process serves at once, sent together;
- ``store``: the gate's Redis, its keys, its ids and its Lua (``lua/``);
- ``persister``: the streams written to MySQL in batches."""
