"""Products, their stock, and the stock-flow ledger."""

from django.db import models

from .limits import SKU_MAX_LENGTH

# Keys compare byte for byte, as Redis compares them. MariaDB's default collation
# (utf8mb4_general_ci) folds case and ignores trailing spaces: "SKU-1" and "sku-1 "
# would be one product to MariaDB and three to Redis. NO PAD: "a" and "a " differ.
BYTE_EXACT = "utf8mb4_nopad_bin"


class Product(models.Model):
    sku = models.CharField(max_length=SKU_MAX_LENGTH, unique=True, db_collation=BYTE_EXACT)
    name = models.CharField(max_length=200)
    # The sale window (the reset sets both; None: open from the reset, never closes).
    # Purchases read it from the sale's state in Redis (orders.salestate), not from here.
    starts_at = models.DateTimeField(null=True, blank=True)
    ends_at = models.DateTimeField(null=True, blank=True)
    # The strategy that guards this product's sale (a name in common.strategies),
    # set by the reset; "" follows the deployment's FLASHSALE_STRATEGY. Purchases read
    # it from the sale's state, like the window.
    strategy = models.CharField(max_length=32, blank=True, default="")
    # Seconds a buyer has to pay for an order (the reset sets it): its units go back on
    # sale when they pass unpaid (``payments``). 0: no payment step, an order is final
    # at its 201.
    payment_window_s = models.PositiveIntegerField(default=0)
    # The sale's number: each reset opens a new one (``product_reset``), and the stock
    # rows it makes carry it. A purchase takes only from the rows of the sale whose
    # terms it checked, so one that checked the old terms takes nothing from the new
    # sale (``SaleReplaced``).
    sale = models.PositiveBigIntegerField(default=0)

    def __str__(self) -> str:
        return self.sku


class Stock(models.Model):
    """One segment of a product's stock (article 004's 分段锁, ConcurrentHashMap's
    segments applied to inventory): the stock is split over ``segment`` 0..N-1, each
    row written under its own lock name, so N buyers can be inside at once. One
    segment, the default, is the whole stock in one row."""

    product = models.ForeignKey(Product, on_delete=models.CASCADE, related_name="segments")
    segment = models.PositiveSmallIntegerField(default=0)
    quantity = models.PositiveIntegerField()
    # What the segment started the sale with; the audit compares orders against the sum.
    initial_quantity = models.PositiveIntegerField()
    # Bumped by every write; the optimistic strategy compares-and-sets on it.
    version = models.PositiveBigIntegerField(default=0)
    # The highest fencing token that wrote this row, and which lock issued it
    # (tokens of different locks are not comparable): a write under an older
    # token than this one is refused (scenario S17).
    fence_source = models.CharField(max_length=64, blank=True, default="")
    fence = models.PositiveBigIntegerField(default=0)
    # The product's sale these rows were made for (``Product.sale``).
    sale = models.PositiveBigIntegerField(default=0)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["product", "segment"],
                                               name="stock_one_row_per_segment")]

    def __str__(self) -> str:
        return f"{self.product_id}[{self.segment}]: {self.quantity}/{self.initial_quantity}"


class StockFlow(models.Model):
    """One row per deduction from a segment, or per return to it: the ledger the audit
    reconciles with the orders. An order served by several segments has a row for
    each, and an expired order a ``return`` row for each of those.

    ``(operation_flag, segment)`` is unique, so the same operation (a retried
    purchase) can never be recorded, and so deducted, twice from a segment.
    ``quantity_before``/``after`` are what the writer saw and wrote in its segment:
    under a lost update two rows of one segment share a "before".
    """

    product = models.ForeignKey(Product, on_delete=models.CASCADE, related_name="flows")
    segment = models.PositiveSmallIntegerField(default=0)
    quantity = models.PositiveIntegerField()  # units taken (a sale) or given back (a return)

    class Kind(models.TextChoices):
        SALE = "sale"
        RETURN = "return"

    # The database's default too: the purchase's stored procedure inserts sales without naming it.
    kind = models.CharField(max_length=8, choices=Kind.choices, default=Kind.SALE, db_default=Kind.SALE)
    operation_flag = models.CharField(max_length=128, db_collation=BYTE_EXACT)
    # The order this deduction belongs to, by id: inventory knows nothing of orders.
    order_reference = models.CharField(max_length=64)
    quantity_before = models.PositiveIntegerField()
    quantity_after = models.PositiveIntegerField()
    instance = models.CharField(max_length=64)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        indexes = [models.Index(fields=["product", "created_at"])]
        constraints = [models.UniqueConstraint(fields=["operation_flag", "segment"],
                                               name="flow_one_row_per_operation_and_segment")]

    def __str__(self) -> str:
        sign = "+" if self.kind == self.Kind.RETURN else "-"
        return f"{self.product_id}[{self.segment}] {sign}{self.quantity} ({self.operation_flag})"
