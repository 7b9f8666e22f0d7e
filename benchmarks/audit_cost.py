"""What one sale audit costs as the sale grows: time and the Python memory it takes,
in-process against the running stack's MariaDB, for sales of each size given.

    python -m benchmarks.audit_cost [--orders 100,100000] [--repeat 5]
    (the stack must be up: make up)

Each size is a product ``audit-cost-<n>`` sold out to ``n`` orders of one unit, each
with its ledger row, written straight to the database once (SQL from MariaDB's
sequence engine) and kept for later runs. The figures: the median wall time of
``orders.selectors.sale_audit`` over ``--repeat`` calls, the peak of Python's
allocations during one (tracemalloc), and the SQL statements it sent.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
import tracemalloc

from stack.config import StackConfig

os.environ.update(StackConfig.from_env().app_environment("audit-cost"))

import django  # noqa: E402

django.setup()

from django.db import connection  # noqa: E402
from django.test.utils import CaptureQueriesContext  # noqa: E402

from benchmarks.sales import sold_out_in_sql  # noqa: E402
from orders.selectors import sale_audit  # noqa: E402


def sold_out_sale(n: int) -> str:
    """``audit-cost-<n>``, sold out to n orders with their ledger rows (made once)."""
    sku = f"audit-cost-{n}"
    with connection.cursor() as cursor:
        cursor.execute("SELECT COUNT(*) FROM orders_order o JOIN inventory_product p ON p.id = o.product_id"
                       " WHERE p.sku = %s", [sku])
        if cursor.fetchone()[0] == n:
            return sku
    sold_out_in_sql(sku, n)
    return sku


def measure(sku: str, repeat: int) -> tuple[float, float, int, bool]:
    """Median seconds, peak MiB of Python allocations, statements, and consistent."""
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        sale_audit(sku=sku)
        times.append(time.perf_counter() - started)
    tracemalloc.start()
    with CaptureQueriesContext(connection) as queries:
        audit = sale_audit(sku=sku)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return statistics.median(times), peak / 2**20, len(queries), audit.consistent and audit.remaining == 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.audit_cost", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--orders", default="100,100000", help="sale sizes, comma-separated")
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args(argv)
    print("| orders | audit, median ms | Python peak, MiB | SQL statements | consistent |")
    print("|---:|---:|---:|---:|---|")
    for n in (int(part) for part in args.orders.split(",")):
        seconds, peak, statements, consistent = measure(sold_out_sale(n), args.repeat)
        print(f"| {n:,} | {seconds * 1000:.1f} | {peak:.2f} | {statements} | {consistent} |", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
