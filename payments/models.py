"""An order's payments at the provider, and the provider's events already handled."""

from django.db import models

from orders.models import Order


class Payment(models.Model):
    """One payment of an order at the provider: its PaymentIntent. An order may have
    several (a declined card, then another); at most one succeeds, since the order
    is paid once."""

    class Status(models.TextChoices):
        STARTED = "started"  # asked for; the provider's webhook tells how it went
        SUCCEEDED = "succeeded"
        FAILED = "failed"
        # Succeeded for an order whose units were sold again meanwhile: given back.
        REFUNDED = "refunded"

    intent_id = models.CharField(max_length=64, primary_key=True)  # the provider's id
    # No constraint, and nothing cascades: a reset deletes its sale's orders as fast
    # as it can (no row-by-row collection), and the provider's record of a payment
    # stands whatever became of its order.
    order = models.ForeignKey(Order, on_delete=models.DO_NOTHING, db_constraint=False,
                              related_name="payments")
    amount = models.PositiveIntegerField()  # in the currency's minor unit, as the provider counts
    currency = models.CharField(max_length=3)
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.STARTED)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    def __str__(self) -> str:
        return f"payment {self.intent_id} of order {self.order_id}: {self.status}"


class WebhookEvent(models.Model):
    """A provider event handled, written in the transaction of what it changed: a
    second delivery of it (the provider delivers at least once) finds it and changes
    nothing."""

    event_id = models.CharField(max_length=64, primary_key=True)
    kind = models.CharField(max_length=64)
    received_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return f"{self.kind} {self.event_id}"
