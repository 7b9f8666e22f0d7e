"""Products, their stock, and the stock-flow ledger."""

from django.db import models


class Product(models.Model):
    sku = models.CharField(max_length=64, unique=True)
    name = models.CharField(max_length=200)

    def __str__(self) -> str:
        return self.sku


class Stock(models.Model):
    product = models.OneToOneField(Product, on_delete=models.CASCADE, related_name="stock")
    quantity = models.PositiveIntegerField()
    # What the sale started with; the audit compares orders against it.
    initial_quantity = models.PositiveIntegerField()
    # Bumped by every write; the optimistic strategy compares-and-sets on it.
    version = models.PositiveBigIntegerField(default=0)
    # The highest fencing token that wrote this row, and which lock issued it
    # (tokens of different locks are not comparable): a write under an older
    # token than this one is refused (scenario S17).
    fence_source = models.CharField(max_length=64, blank=True, default="")
    fence = models.PositiveBigIntegerField(default=0)

    def __str__(self) -> str:
        return f"{self.product_id}: {self.quantity}/{self.initial_quantity}"


class StockFlow(models.Model):
    """One row per deduction: the ledger the audit reconciles with the orders.

    ``operation_flag`` is unique, so the same operation (a retried purchase) can
    never be recorded, and so deducted, twice. ``quantity_before``/``after`` are
    what the writer saw and wrote: under a lost update two rows share a "before".
    """

    product = models.ForeignKey(Product, on_delete=models.CASCADE, related_name="flows")
    quantity = models.PositiveIntegerField()
    operation_flag = models.CharField(max_length=128, unique=True)
    # The order this deduction belongs to, by id: inventory knows nothing of orders.
    order_reference = models.CharField(max_length=64)
    quantity_before = models.PositiveIntegerField()
    quantity_after = models.PositiveIntegerField()
    instance = models.CharField(max_length=64)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        indexes = [models.Index(fields=["product", "created_at"])]

    def __str__(self) -> str:
        return f"{self.product_id} -{self.quantity} ({self.operation_flag})"
