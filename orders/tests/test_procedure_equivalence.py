"""``atomic``'s one-call purchase (``orders/transaction/sql/purchase.sql`` calling
``inventory/sql/stock_take.sql``) against the ORM's path for the same strategy
(``orders.transaction.sell``): the same purchases, run both ways on the real
MariaDB, answer alike and leave the same rows. And the database runs the newest
version of each procedure's file: a version without its migration fails here."""

import random
import re
from datetime import timedelta
from pathlib import Path

import pytest
from django.conf import settings
from django.db import connection
from django.http import HttpRequest
from django.test import override_settings

from common.errors import ApplicationError
from common.requestlog import request_named
from common.strategies import StrategySpec
from inventory.models import Stock, StockFlow
from inventory.services import product_reset
from orders.models import BuyerQuota, Order
from orders.purchase import order_create

USERS = ("u1", "u2", "u3", "u4", "u5")
STOCK = 12


def _purchases(seed: int, count: int = 16) -> list[tuple[str, int, str]]:
    """(user, quantity, key): a start that meets a replay, the buyer's limit and a
    key's conflict; ``count`` purchases drawn from ``seed``, some of them under a
    key used before, by the same request (a retry) or another (a conflict); and
    buyers enough to sell out."""
    made = [("u1", 3, "a"), ("u1", 3, "a"), ("u1", 2, "b"), ("u2", 3, "a")]
    rng = random.Random(seed)
    for n in range(count):
        if rng.random() < 0.2:
            user, quantity, key = rng.choice(made)
            if rng.random() < 0.5:
                quantity = quantity % 3 + 1
        else:
            user, quantity, key = rng.choice(USERS), rng.randint(1, 3), f"k{n}"
        made.append((user, quantity, key))
    return made + [(f"last{n}", 3, f"last{n}") for n in range(STOCK // 3 + 1)]


def _answer(result_or_error) -> tuple:
    if isinstance(result_or_error, ApplicationError):
        return type(result_or_error).__name__, {**result_or_error.extra, "sku": None}
    r = result_or_error
    return "placed", r.quantity, r.remaining, r.replayed, r.status


def _sale(sku: str, purchases, *, stock: int, window_s: int) -> dict:
    """Run ``purchases`` on a new product ``sku`` (its keys prefixed with it); its
    answers and its rows, with the product, the prefix and the ids taken out."""
    product = product_reset(sku=sku, stock=stock, segments=1, payment_window_s=window_s)
    answers = []
    for n, (user, quantity, key) in enumerate(purchases):
        request = HttpRequest()
        request.META["HTTP_X_REQUEST_ID"] = f"request-{n}"  # as nginx names it
        request_named(request)
        try:
            answers.append(_answer(order_create(sku=sku, quantity=quantity, user_id=user,
                                                idempotency_key=f"{sku}:{key}")))
        except ApplicationError as e:
            answers.append(_answer(e))
    orders = list(Order.objects.filter(product=product).order_by("pk"))
    index = {str(o.pk): n for n, o in enumerate(orders)}

    def unprefixed(key: str) -> str:
        return key.removeprefix(f"{sku}:")

    def window(o: Order):
        return None if o.expires_at is None else round((o.expires_at - o.created_at) / timedelta(seconds=1))

    return {
        "answers": answers,
        "orders": [(o.user_id, o.quantity, unprefixed(o.idempotency_key), o.instance, o.strategy, o.retries,
                    o.status, window(o), o.request_id) for o in orders],
        "ledger": [(f.segment, f.kind, f.quantity, unprefixed(f.operation_flag), index[f.order_reference],
                    f.quantity_before, f.quantity_after, f.instance)
                   for f in StockFlow.objects.filter(product=product).order_by("pk")],
        "stock": list(Stock.objects.filter(product=product).values_list("segment", "quantity", "version")),
        "quotas": sorted(BuyerQuota.objects.filter(product=product).values_list("user_id", "bought")),
    }


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("seed", [1, 2, 3])
@pytest.mark.parametrize("window_s", [0, 300])
@override_settings(FLASHSALE_PER_USER_LIMIT=4, FLASHSALE_STRATEGY="atomic")
def test_the_call_and_the_orms_path_answer_alike_and_leave_the_same_rows(
        seed, window_s, db, monkeypatch):
    purchases = _purchases(seed)
    called = _sale(f"call-{seed}-{window_s}", purchases, stock=STOCK, window_s=window_s)
    with monkeypatch.context() as m:
        m.setattr(StrategySpec, "one_trip", property(lambda self: False))  # the ORM's statements
        orm = _sale(f"orm-{seed}-{window_s}", purchases, stock=STOCK, window_s=window_s)
    assert called == orm
    assert [o[-1] for o in called["orders"]] and all(o[-1].startswith("request-") for o in called["orders"])
    # Worth comparing: the run sold, refused for stock and for the limit, and replayed.
    kinds = {a[0] if a[0] != "placed" or not a[3] else "replayed" for a in called["answers"]}
    assert {"placed", "replayed", "SoldOut", "LimitReached", "IdempotencyConflict"} <= kinds, kinds


def _body(sql: str) -> str:
    """A procedure's body as the server keeps it: from its BEGIN to its END, with
    runs of blank space made one."""
    return re.sub(r"\s+", " ", sql[sql.index("\nBEGIN") + 1:].strip())


def _newest(pattern: str) -> Path:
    """The newest version of a procedure's SQL: each is named for its migration."""
    return max(Path(settings.BASE_DIR).glob(pattern), key=lambda path: path.name)


@pytest.mark.django_db
@pytest.mark.parametrize("name, pattern", [
    ("flashsale_purchase", "orders/transaction/sql/purchase.*.sql"),
    ("flashsale_stock_take", "inventory/sql/stock_take.*.sql"),
])
def test_the_database_runs_the_newest_version_of_each_procedure(name, pattern):
    with connection.cursor() as cursor:
        cursor.execute("SELECT ROUTINE_DEFINITION FROM information_schema.ROUTINES "
                       "WHERE ROUTINE_SCHEMA = DATABASE() AND ROUTINE_NAME = %s", [name])
        (installed,) = cursor.fetchone()
    assert _body("\n" + installed) == _body(_newest(pattern).read_text())
