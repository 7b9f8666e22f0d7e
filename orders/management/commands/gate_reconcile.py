"""``manage.py gate_reconcile [SKU ...]``: rebuild gate sales after their Redis failed over."""

from typing import Any

from django.core.management.base import CommandError, CommandParser

from common.commands import CommandWithoutChecks
from common.errors import ApplicationError
from orders.gate.lifecycle import gate_listed
from orders.gate.reconcile import gate_failed_over, gate_reconcile


class Command(CommandWithoutChecks):
    help = ("Rebuild the gate sales whose Redis failed over (or restarted) since they opened: once the "
            "persisters wrote what the stream holds, each reopens with what MySQL has left, so that no unit "
            "MySQL holds is sold again. Without SKU, every listed sale that failed over. The persisters do "
            "this by themselves; running it again changes nothing.")

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("skus", nargs="*", metavar="SKU")
        parser.add_argument("--within", type=float, default=30.0,
                            help="seconds to wait for the persisters to write each sale's stream")

    def handle(self, *args: str, skus: list[str], within: float, **options: Any) -> None:
        try:
            skus = skus or gate_failed_over(gate_listed())
            for sku in skus:
                done = gate_reconcile(sku=sku, within=within)
                if done is None:
                    self.stdout.write(f"{sku}: nothing to reconcile")
                else:
                    self.stdout.write(f"{sku}: sale {done.replaced} replaced by sale {done.sale}: stock "
                                      f"{done.stock} (the promoted Redis held {done.redis_stock})")
        except ApplicationError as e:
            raise CommandError(e.message) from e
