"""Conservation on the final read: each unit held by one live order, the gate's
Redis agreeing with MariaDB, and the provider's money matching the orders paid."""

from common.history import OK, Final, Pay, Purchase, Reset
from verdicts.checker import check
from verdicts.conservation import conservation

SKU = "s"
PRICE = 100


def buy(n, order, remaining):
    return Purchase(n, f"c{n}", SKU, 1, f"k{n}", n * 10, n * 10 + 1, OK, 201, None, order, remaining)


def kinds(final, *purchases, stock=2):
    return [kind for kind, _ in conservation(list(purchases), final, stock)]


def test_a_settled_sale_conserves():
    final = Final(SKU, 0, [("k1", 1, "paid"), ("k2", 2, "expired"), ("k3", 3, "pending")], 99,
                  gate_remaining=0, money=[(1, PRICE, 0), (2, PRICE, PRICE)], unit_price=PRICE)
    assert kinds(final) == []


def test_a_unit_held_by_two_live_orders_names_the_order_and_the_unit():
    orders = [("k1", 1, "paid"), ("k2", 2, "expired"), ("k3", 3, "pending"), ("k4", 4, "paid")]
    final = Final(SKU, 0, orders, 99)
    found = conservation([], final, 2)
    assert [kind for kind, _ in found] == ["unit held twice"]
    assert "order 4 (paid) holds unit 3 of 2" in found[0][1]


def test_orders_without_statuses_are_all_live():
    assert kinds(Final(SKU, 0, [("k1", 1), ("k2", 2), ("k3", 3)], 99)) == ["unit held twice"]


def test_units_stranded_in_the_gate_are_named():
    final = Final(SKU, 1, [("k1", 1, "expired"), ("k2", 2, "paid")], 99, gate_remaining=0)
    found = conservation([], final, 2)
    assert found[0][0] == "gate disagrees"
    assert "1 units stranded" in found[0][1]


def test_a_unit_returned_twice_to_the_gate_is_named():
    final = Final(SKU, 1, [("k1", 1, "expired"), ("k2", 2, "paid")], 99, gate_remaining=2)
    assert "returned there twice" in conservation([], final, 2)[0][1]


def test_a_buyer_charged_for_an_expired_order():
    final = Final(SKU, 1, [("k1", 1, "expired"), ("k2", 2, "paid")], 99, money=[(1, PRICE, 0), (2, PRICE, 0)],
                  unit_price=PRICE)
    found = conservation([], final, 2)
    assert found == [("money", "order 1 is expired and the provider kept 100 of its buyer's money (took 100, "
                      "gave back 0), where 0 is due")]


def test_an_order_paid_twice_or_not_at_all():
    twice = Final(SKU, 0, [("k1", 1, "paid")], 99, money=[(1, 2 * PRICE, 0)], unit_price=PRICE)
    unpaid = Final(SKU, 0, [("k1", 1, "paid")], 99, money=[], unit_price=PRICE)
    assert kinds(twice, stock=1) == kinds(unpaid, stock=1) == ["money"]


def test_a_refunded_order_gave_everything_back():
    kept = Final(SKU, 1, [("k1", 1, "refunded")], 99, money=[(1, PRICE, 0)], unit_price=PRICE)
    back = Final(SKU, 1, [("k1", 1, "refunded")], 99, money=[(1, PRICE, PRICE)], unit_price=PRICE)
    assert kinds(kept, stock=1) == ["money"]
    assert kinds(back, stock=1) == []


def test_a_charge_for_an_order_the_sale_has_not():
    final = Final(SKU, 1, [], 99, money=[(7, PRICE, 0)], unit_price=PRICE)
    assert "order 7, which the sale has not" in conservation([], final, 1)[0][1]


def test_the_checker_reports_conservation_beside_linearizability():
    # Every answer true, and the money wrong: linearizable, and still not valid.
    events = [Reset(SKU, 1, 0, window=1e-7), buy(1, 1, 0), Pay(2, "p", SKU, 1, 20, 30, OK, "paid"),
              Final(SKU, 0, [("k1", 1, "paid")], 99, money=[(1, PRICE, 0)], unit_price=PRICE,
                    gate_remaining=1)]
    verdict = check(events).skus[0]
    assert verdict.linearizable is True
    assert [a.kind for a in verdict.anomalies] == ["gate disagrees"]
    assert check(events).valid is False


def _reset_mid_sale(*after):
    """A sale of 2 that sells one unit, then is reset at 100 to 5 units opening at 10_000."""
    return [Reset(SKU, 2, 0), buy(1, 1, 1),
            Reset(SKU, 5, 100, opens_at=10_000),
            Purchase(20, "c20", SKU, 1, "k20", 200, 210, "failed", 409, "not_started"), *after]


def test_a_reset_mid_history_starts_a_new_sale_that_its_terms_keep_closed():
    verdict = check(_reset_mid_sale(Final(SKU, 5, [], 300)))
    assert [v.sku for v in verdict.skus] == [SKU, f"{SKU} (sale 2)"]
    assert verdict.valid is True, verdict.anomalies


def test_an_order_that_raced_the_reset_onto_the_old_terms_is_named():
    # k1's purchase was invoked in the first sale; its order is in the second's final read.
    verdict = check(_reset_mid_sale(Final(SKU, 4, [("k1", 1)], 300)))
    new_sale = verdict.skus[1]
    assert "refused by its terms" in [a.kind for a in new_sale.anomalies]
    assert any("order 1 (key k1)" in a.detail for a in new_sale.anomalies)


def test_a_201_before_the_sale_opens_is_refused_by_its_terms():
    early = Purchase(21, "c21", SKU, 1, "k21", 200, 210, OK, 201, None, 7, 4)
    verdict = check(_reset_mid_sale(early, Final(SKU, 4, [("k21", 7)], 300)))
    kinds = [a.kind for a in verdict.skus[1].anomalies]
    assert "refused by its terms" in kinds
