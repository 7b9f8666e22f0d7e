"""A sale's waiting room as its reset set it: the durable half. The queue itself
(places, admissions) lives in Redis (``waitingroom.store``)."""

from django.db import models

from inventory.models import Product


class Room(models.Model):
    """How a product's sale admits its buyers: ``rate`` a second, at most ``active``
    admitted and not yet buying at once, each admission good for ``admission_s``. A
    product without a row (or with ``rate`` 0) has no waiting room."""

    product = models.OneToOneField(Product, on_delete=models.CASCADE, primary_key=True, related_name="room")
    rate = models.PositiveIntegerField()  # admissions a second
    active = models.PositiveIntegerField()  # admitted and not yet bought, at most, at once
    admission_s = models.PositiveIntegerField()  # how long an admission lasts
    opened_at = models.DateTimeField()  # the sale's room: a token of an earlier one is refused
    # The order places are admitted in: "fifo", as they were taken; "shuffled", the
    # places taken before the sale opens in a random order (a shuffled pre-queue),
    # then the later ones as they were taken.
    admit_order = models.CharField(max_length=8, choices=[("fifo", "fifo"), ("shuffled", "shuffled")],
                                   default="fifo")
    # The zero bits of the proof of work a buyer shows before taking a place (0: none;
    # common.challenges): what a bot pays for each of its thousand places.
    challenge_bits = models.PositiveSmallIntegerField(default=0)

    def __str__(self) -> str:
        return (f"the room of {self.product_id}: {self.rate}/s, {self.active} active, {self.admission_s} s, "
                f"{self.admit_order}")
