from datetime import datetime, timedelta
from typing import Any

from django.db import models

from common.keys import KEY_MAX_LENGTH
from inventory.models import BYTE_EXACT, Product


class Order(models.Model):
    user_id = models.CharField(max_length=64, db_collation=BYTE_EXACT)
    product = models.ForeignKey(Product, on_delete=models.PROTECT, related_name="orders")
    quantity = models.PositiveIntegerField()
    # The final guard against a retried purchase counting twice: whatever the Redis
    # fast path misses, the database refuses.
    # With buyers signed in, as common.keys keeps it.
    idempotency_key = models.CharField(max_length=KEY_MAX_LENGTH, unique=True, db_collation=BYTE_EXACT)
    instance = models.CharField(max_length=64)
    strategy = models.CharField(max_length=32)
    # Attempts that found the stock changed before this one went through
    # (the optimistic strategy; 0 for the others).
    retries = models.PositiveSmallIntegerField(default=0)
    created_at = models.DateTimeField(auto_now_add=True)
    # When the gate accepted the order (its stream entry's time); created_at is when a
    # persister wrote it. Null for the other strategies: they answer after the write.
    accepted_at = models.DateTimeField(null=True, blank=True)

    class Status(models.TextChoices):
        # The sale has no payment window: the order is final at its 201.
        PLACED = "placed"
        # Waiting for its payment until ``expires_at``; then ``paid`` or ``expired``,
        # each by one conditional write from ``pending`` (``payments``).
        PENDING = "pending"
        PAID = "paid"
        # Unpaid in time: its units went back on sale.
        EXPIRED = "expired"
        # Paid after it expired, when its units were sold again: the money went back.
        REFUNDED = "refunded"

    # The orders whose units are out of the stock; an expired (or refunded) order's went back.
    HOLDING_STOCK = (Status.PLACED, Status.PENDING, Status.PAID)

    # The database's default too, for SQL that inserts orders without naming it (an
    # instance of the previous release, during a deploy).
    status = models.CharField(max_length=8, choices=Status.choices, default=Status.PLACED,
                              db_default=Status.PLACED)
    expires_at = models.DateTimeField(null=True, blank=True)
    # The name nginx gave the request that placed it (X-Request-ID: common.requestlog),
    # "" without one: from nginx's access line to this row. Not indexed: an operator's
    # lookup, rare, is not worth an index written on every purchase.
    request_id = models.CharField(max_length=64, blank=True, default="", db_default="")

    class Meta:
        indexes = [models.Index(fields=["product", "created_at"]),
                   # The expirer's claim: a product's due pending orders, oldest first.
                   # The product first, as in the index above: led by the status, every
                   # order of a sale without a window would share one key ("placed",
                   # NULL), and a reset deleting one product's orders would lock where
                   # every other product's are inserted.
                   models.Index(fields=["product", "status", "expires_at"], name="order_due")]

    def __str__(self) -> str:
        return f"order {self.pk}: {self.quantity} x {self.product_id} for {self.user_id}"

    @classmethod
    def terms(cls, product: Product, placed_at: datetime) -> dict[str, Any]:
        """The status and expiry of an order of ``product`` placed at ``placed_at``:
        pending until the sale's payment window passes, or final at once without one."""
        if not product.payment_window_s:
            return {"status": cls.Status.PLACED, "expires_at": None}
        return {"status": cls.Status.PENDING,
                "expires_at": placed_at + timedelta(seconds=product.payment_window_s)}


class BuyerQuota(models.Model):
    """Units each buyer has bought of a product, for the per-user limit
    (``FLASHSALE_PER_USER_LIMIT``). Written in the purchase's own transaction by one
    conditional UPDATE, so the limit holds under every strategy, the lockless ones
    too, and a purchase that fails gives its units back with its rollback."""

    product = models.ForeignKey(Product, on_delete=models.CASCADE, related_name="quotas")
    user_id = models.CharField(max_length=64, db_collation=BYTE_EXACT)
    bought = models.PositiveIntegerField(default=0)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["product", "user_id"], name="one_quota_per_buyer")]

    def __str__(self) -> str:
        return f"{self.user_id} bought {self.bought} of {self.product_id}"


class GateSale(models.Model):
    """One sale of a product under the gate (``orders.gate``): each reset or warm-up
    opens a new one. Its id is the block the sale's order ids come from, so they are
    known in Redis at once and never collide with another sale's, or with the ids
    MySQL hands out (odd: see ``auto_increment_increment`` in the settings; the
    gate's are even)."""

    product = models.ForeignKey(Product, on_delete=models.CASCADE, related_name="gate_sales")
    # The stock Redis was loaded with: order ids are block * 2**25 + 2 * (units sold before).
    loaded_stock = models.PositiveIntegerField()
    opened_at = models.DateTimeField(auto_now_add=True)
    # When a reconciliation after a failover replaced it (``orders.gate.reconcile``):
    # from then on the persisters write none of its orders, from whichever server.
    superseded_at = models.DateTimeField(null=True, blank=True)

    def __str__(self) -> str:
        return f"gate sale {self.pk} of {self.product_id}"
