"""The gate's metrics. The persisters', each persister's own (``manage.py
persist_orders --metrics-port``): what it wrote, in what batches, how long after each
order was accepted. What waits to be written is read by the apps
(``orders.gate.backlog``); the apps count how many sale scripts they send together."""

from __future__ import annotations

from prometheus_client import Counter, Histogram

INTENTS = Counter(
    "flashsale_gate_intents",
    "The gate's order intents a persister is done with, by outcome: written (to MySQL), "
    "already (written before: delivered again), closed (of a sale since reset: nothing "
    "to write), dead_lettered (the database refused it)",
    ["outcome"],
)
BATCH_SIZE = Histogram(
    "flashsale_gate_batch_size", "Intents in a batch a persister wrote",
    buckets=(1, 2, 5, 10, 20, 50, 100, 200, 500, 1000))
WRITE_SECONDS = Histogram(
    "flashsale_gate_write_seconds",
    "Seconds a batch took to write: its transaction (and one per intent after a refusal)",
    buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5))
CONFIRM_SECONDS = Histogram(
    "flashsale_gate_confirm_seconds",
    "Seconds from an order accepted (its stream entry) to its row written in MySQL",
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120))
SCRIPT_BATCH = Histogram(
    "flashsale_gate_script_batch",
    "The gate's scripts an app process sent its Redis in one write: the purchases it "
    "served at once (orders/gate/pipeline.py), by script",
    ["script"],
    buckets=(1, 2, 4, 8, 16, 32, 64))
