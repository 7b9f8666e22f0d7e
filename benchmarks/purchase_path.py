"""The project's Python modules one purchase passes through, in the order it first
enters each: ``order_create`` for one accepted purchase of each strategy asked,
traced with ``sys.setprofile`` after a warm-up purchase (so that imports, first
connections and script loads are not counted), against the running stack's
MariaDB and Redis. The modules a reader follows to understand the purchase.

    python -m benchmarks.purchase_path [--strategy atomic --strategy gate] [--files]
    (the stack must be up: make up)

Writes products ``path-*`` to the stack's database.
"""

from __future__ import annotations

import argparse
import os
import sys
import uuid
from pathlib import Path

from stack.config import StackConfig

os.environ.update(StackConfig.from_env().app_environment("path"))

import django  # noqa: E402

django.setup()

from django.conf import settings  # noqa: E402

from orders.purchase import order_create  # noqa: E402
from orders.reset import sale_reset  # noqa: E402

ROOT = Path(settings.BASE_DIR).resolve()
HERE = Path(__file__).resolve()  # the tracer's own calls


def _project_module(filename: str) -> str | None:
    """``filename`` as a project path (``orders/purchase.py``), or None: not the project's."""
    path = Path(filename).resolve()
    if path.suffix != ".py" or not path.is_relative_to(ROOT) or ".venv" in path.parts or path == HERE:
        return None
    return str(path.relative_to(ROOT))


def modules_entered(strategy: str) -> list[str]:
    """The project's modules one accepted purchase under ``strategy`` enters, first
    entry first."""
    sku = f"path-{strategy}"
    sale_reset(sku=sku, stock=10**6, strategy=strategy)

    def buy():
        return order_create(sku=sku, quantity=1, user_id=uuid.uuid4().hex, idempotency_key=uuid.uuid4().hex)

    buy()  # imports, connections, the sale's script loaded
    entered: dict[str, None] = {}

    def profile(frame, event, arg):
        if event == "call" and (module := _project_module(frame.f_code.co_filename)) is not None:
            entered.setdefault(module)

    sys.setprofile(profile)
    try:
        result = buy()
    finally:
        sys.setprofile(None)
    if result.status not in ("confirmed", "accepted"):
        raise SystemExit(f"{strategy}: the traced purchase was answered {result.status}")
    return list(entered)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--strategy", action="append", dest="strategies",
                        help="this strategy (again for more; default: atomic and gate)")
    parser.add_argument("--files", action="store_true", help="list the modules, not only count them")
    args = parser.parse_args()
    for strategy in args.strategies or ["atomic", "gate"]:
        entered = modules_entered(strategy)
        print(f"{strategy}: {len(entered)} modules")
        if args.files:
            print("".join(f"  {module}\n" for module in entered), end="")


if __name__ == "__main__":
    main()
