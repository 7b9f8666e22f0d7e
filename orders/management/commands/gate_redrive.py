"""``manage.py gate_redrive SKU``: write a gate sale's dead-lettered orders again."""

from typing import Any

from django.core.management.base import CommandError, CommandParser

from common.commands import CommandWithoutChecks
from common.errors import ApplicationError
from orders.gate.redrive import dead_letters_redrive


class Command(CommandWithoutChecks):
    help = ("Write the orders the persisters dead-lettered for SKU (MySQL refused them after their "
            "buyers heard 201) again, once the cause is fixed. An order already in MySQL is not "
            "written twice; one still refused stays dead-lettered, with the reason. Exits 1 if any is.")

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("sku")

    def handle(self, *args: str, sku: str, **options: Any) -> None:
        try:
            outcome = dead_letters_redrive(sku=sku)
        except ApplicationError as e:
            raise CommandError(e.message) from e
        self.stdout.write(f"{sku}: {len(outcome.written)} written, {len(outcome.already)} already written, "
                          f"{len(outcome.closed)} of a sale since reset, "
                          f"{len(outcome.refused)} still refused")
        for order, reason in outcome.refused.items():
            self.stdout.write(f"  order {order}: {reason}")
        if outcome.refused:
            raise CommandError(f"{len(outcome.refused)} dead-lettered orders of {sku} are still refused")
