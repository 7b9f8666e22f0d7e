"""``manage.py gate_warm SKU``: open a gate sale of what the database has left."""

from typing import Any

from django.core.management.base import CommandError, CommandParser

from common.commands import CommandWithoutChecks
from common.errors import ApplicationError
from orders.gate.lifecycle import gate_warm


class Command(CommandWithoutChecks):
    help = ("Load a product's remaining stock (as MySQL has it) into the gate's Redis as a new sale, "
            "with its orders' Idempotency-Keys: after Redis lost the sale. Wait until the audit's backlog "
            "is 0 first: what Redis accepted and MySQL has not written is sold again otherwise.")

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("sku")

    def handle(self, *args: str, sku: str, **options: Any) -> None:
        try:
            sale = gate_warm(sku=sku)
        except ApplicationError as e:
            raise CommandError(e.message) from e
        self.stdout.write(f"{sku}: the gate sells {sale.loaded_stock} units (sale {sale.pk})")
