"""What the stack's database holds for a product, read straight from MariaDB (not
through the app): the final read of a recorded history, and the chaos runner's
verdict."""

from __future__ import annotations

from common.keys import key_sent
from stack.config import StackConfig
from stack.servers import APP_DATABASE, mariadb_app_connection


class Truth:
    """What the stack's database (or ``database``, on its MariaDB) holds for one
    product, read as an auditor would."""

    def __init__(self, config: StackConfig, *, database: str = APP_DATABASE, signed_in: bool = False):
        self.db = mariadb_app_connection(config, database=database)
        self.signed_in = signed_in  # the buyers signed in: each order keeps its key scoped (common.keys)

    def _rows(self, sql: str, sku: str) -> list[tuple]:
        with self.db.cursor() as cursor:
            cursor.execute(sql, [sku])
            return list(cursor.fetchall())

    def orders(self, sku: str, *, statuses: bool = False) -> list[tuple]:
        """Every order row: (the key it was sent with, order id), a key twice if it has
        two; with ``statuses``, (key, order id, status)."""
        rows = self._rows("SELECT o.user_id, o.idempotency_key, o.id, o.status FROM orders_order o "
                          "JOIN inventory_product p ON p.id = o.product_id "
                          "WHERE p.sku = %s ORDER BY o.id", sku)
        return [(key_sent(buyer, key) if self.signed_in else key, order_id, *([status] if statuses else []))
                for buyer, key, order_id, status in rows]

    def double_keys(self, sku: str) -> int:
        return len(self._rows("SELECT o.idempotency_key FROM orders_order o JOIN inventory_product p "
                              "ON p.id = o.product_id WHERE p.sku = %s GROUP BY o.idempotency_key "
                              "HAVING COUNT(*) > 1", sku))

    def order_times(self, sku: str) -> list[float]:
        rows = self._rows("SELECT UNIX_TIMESTAMP(o.created_at) FROM orders_order o JOIN inventory_product p "
                          "ON p.id = o.product_id WHERE p.sku = %s ORDER BY o.created_at", sku)
        return [float(t) for (t,) in rows]

    def statuses(self, sku: str) -> dict[str, int]:
        """The product's orders by status (placed, pending, paid, expired, refunded)."""
        rows = self._rows("SELECT o.status, COUNT(*) FROM orders_order o JOIN inventory_product p "
                          "ON p.id = o.product_id WHERE p.sku = %s GROUP BY o.status", sku)
        return {status: int(n) for status, n in rows}

    def paid_late(self, sku: str) -> int:
        """Orders paid after they expired: a ``resale`` row each in the ledger."""
        rows = self._rows("SELECT COUNT(*) FROM inventory_stockflow f JOIN inventory_product p "
                          "ON p.id = f.product_id "
                          "WHERE p.sku = %s AND f.operation_flag LIKE 'resale %%'", sku)
        return int(rows[0][0])

    def payments(self, sku: str) -> dict[str, int]:
        """The product's orders' payments by status (started: the provider's webhook
        not handled yet; succeeded, failed, refunded)."""
        rows = self._rows("SELECT pay.status, COUNT(*) FROM payments_payment pay "
                          "JOIN orders_order o ON o.id = pay.order_id JOIN inventory_product p "
                          "ON p.id = o.product_id WHERE p.sku = %s GROUP BY pay.status", sku)
        return {status: int(n) for status, n in rows}

    def ledger(self, sku: str) -> list[tuple[float, str, int]]:
        """The product's ledger rows, (epoch seconds, kind, units), in the order written."""
        rows = self._rows("SELECT UNIX_TIMESTAMP(f.created_at), f.kind, f.quantity "
                          "FROM inventory_stockflow f JOIN inventory_product p ON p.id = f.product_id "
                          "WHERE p.sku = %s ORDER BY f.id", sku)
        return [(float(at), kind, int(units)) for at, kind, units in rows]

    def close(self) -> None:
        self.db.close()
