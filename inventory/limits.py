"""Bounds of the inventory's shape, plain constants (no Django) so that the API, the
services and the load tools outside Django share one value."""

# Most rows a product's stock is split into: each segment is a lock a buyer can hold,
# and past a few per core more of them buy nothing.
MAX_SEGMENTS = 64

# Longest sku: the product's unique key, as the API accepts it.
SKU_MAX_LENGTH = 64
