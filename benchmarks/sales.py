"""Large sales written straight to the database, for what measures the cost of a
sale's size (``benchmarks.audit_cost``) and the tests that hold it flat. Django must
be set up by the caller."""

from __future__ import annotations

from django.db import connection

from inventory.services import product_reset


def sold_out_in_sql(sku: str, n: int, *, instance: str = "bench") -> None:
    """``sku`` reset to a stock of ``n`` and sold out to ``n`` orders of one unit,
    each with its ledger row, in three statements (rows from MariaDB's sequence
    engine): a hundred thousand orders in seconds, where purchases would take minutes."""
    product = product_reset(sku=sku, stock=n, strategy="atomic")
    with connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO orders_order (user_id, quantity, idempotency_key, instance, strategy, retries,"
            " created_at, product_id) SELECT CONCAT('buyer-', seq), 1, CONCAT(%s, '-', seq), %s,"
            f" 'atomic', 0, UTC_TIMESTAMP(6), %s FROM seq_1_to_{int(n)}", [sku, instance, product.pk])
        cursor.execute(
            "INSERT INTO inventory_stockflow (product_id, segment, quantity, operation_flag, order_reference,"
            " quantity_before, quantity_after, instance, created_at)"
            " SELECT o.product_id, 0, 1, o.idempotency_key, o.id, 1, 0, %s, o.created_at"
            " FROM orders_order o WHERE o.product_id = %s", [instance, product.pk])
        cursor.execute("UPDATE inventory_stock SET quantity = 0 WHERE product_id = %s", [product.pk])
