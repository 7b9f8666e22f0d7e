"""The gate's room: a sale decided in Redis and written to the database afterwards.

- ``lifecycle``: the overview (start there): a sale opened by the reset, closed,
  warmed again, handed to the database when the deployment leaves the gate;
- ``tally``: a sale's counts in Redis, and an order accepted and not yet written;
- ``sell``: one purchase, the sale's script, and the sold-out memory;
- ``pipeline``: the scripts of the purchases a process serves at once, sent together;
- ``store``: the gate's Redis, its keys, its ids and its Lua (``lua/``);
- ``persister``: the streams written to MySQL in batches; ``consumers``: a
  persister's place in the streams' group; ``redrive``: the dead letters written again;
- ``returns``: units given back to a sale (an expiry, a refund) and taken again (a
  late payment);
- ``reconcile`` and ``takeover``: a sale rebuilt from the database after its Redis
  failed over or lost it;
- ``backlog`` and ``metrics``: what waits to be written, and the gate's figures."""
