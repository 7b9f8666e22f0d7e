"""The history format: what each HTTP answer is recorded as, the file round trip,
and the errors a malformed line gets."""

import pytest

from common.history import FAILED, OK, UNKNOWN, HistoryError, Purchase, Recorder, parse, read


def answered(status, body):
    op = Purchase(1, "c", "s", 1, "k", invoke=10)
    op.answered(status, body, complete=20)
    return op


@pytest.mark.parametrize(("status", "body", "outcome"), [
    (201, {"order_id": 7, "remaining": 3}, OK),
    (200, {"order_id": 7}, OK),
    (409, {"error": "sold_out"}, FAILED),
    (409, {"error": "idempotency_conflict"}, FAILED),
    (429, {"error": "throttled"}, FAILED),
    (400, {"error": "invalid"}, FAILED),
    (401, {"error": "not_authenticated"}, FAILED),
    (403, {"error": "admission_refused", "reason": "missing"}, FAILED),
    (503, {"error": "busy"}, FAILED),
    (503, {"error": "stale_lock"}, FAILED),
    (503, {"error": "unavailable"}, FAILED),
    (503, {"error": "outcome_unknown"}, UNKNOWN),
    (504, {"error": "timeout"}, UNKNOWN),
    # nginx's 502: the instance may have died after taking the purchase.
    (502, {"error": "unavailable", "backend": "app"}, UNKNOWN),
    (500, {}, UNKNOWN),
])
def test_each_answer_is_recorded_as_the_contract_says(status, body, outcome):
    assert answered(status, body).outcome == outcome


def test_an_order_keeps_its_id_and_a_201_what_was_left():
    created, replayed = answered(201, {"order_id": 7, "remaining": 3}), answered(200, {"order_id": 7,
                                                                                      "remaining": 9})
    assert (created.order_id, created.remaining, created.replayed) == (7, 3, False)
    assert (replayed.order_id, replayed.remaining, replayed.replayed) == (7, None, True)  # a replay's is old


def test_a_history_survives_its_file(tmp_path):
    recorder = Recorder()
    recorder.reset("s", 2)
    op = recorder.invoke("c1", "s", 1, "k1")
    op.answered(201, {"order_id": 5, "remaining": 1}, recorder.now())
    lost = recorder.invoke("c2", "s", 1, "k2")
    lost.unanswered(recorder.now(), "ReadTimeout")
    recorder.final("s", 1, [("k1", 5)])
    events = read(recorder.write(tmp_path / "h.jsonl"))
    assert [e.type for e in events] == ["reset", "purchase", "purchase", "final"]
    assert events[1] == op and events[2].outcome == UNKNOWN and events[3].orders == [("k1", 5)]
    assert events[1].invoke < events[1].complete < events[3].at


@pytest.mark.parametrize(("line", "why"), [
    ('[1, 2]', "one JSON object"),
    ('{"type": "sale"}', "unknown type"),
    ('{"type": "purchase", "id": 1, "client": "c", "sku": "s", "quantity": 1, "key": "k", "invoke": 1, '
     '"complete": 2, "outcome": "maybe"}', "outcome must be"),
    ('{"type": "purchase", "id": 1, "client": "c", "sku": "s", "quantity": 1, "key": "k", "invoke": 1, '
     '"complete": 2, "outcome": "ok"}', "order_id"),
    ('{"type": "purchase", "id": 1, "client": "c", "sku": "s", "quantity": 1, "key": "k", "invoke": 5, '
     '"complete": 2, "outcome": "failed"}', "before it was invoked"),
    ('{"type": "purchase", "id": 1, "client": "c", "sku": "s", "quantity": 1, "key": "k", "invoke": 5, '
     '"outcome": "failed"}', "only an unknown"),
    ('{"type": "reset", "sku": "s"}', "missing"),
    ('not json', "Expecting value"),
])
def test_a_malformed_line_is_named_with_why(line, why):
    with pytest.raises(HistoryError) as raised:
        list(parse(['{"type": "reset", "sku": "s", "stock": 1, "at": 0}', line]))
    assert str(raised.value).startswith("line 2: ") and why in str(raised.value)


def test_a_window_sale_survives_its_file(tmp_path):
    recorder = Recorder()
    recorder.reset("s", 1, window=2.5)
    op = recorder.invoke("c1", "s", 1, "k1")
    op.answered(201, {"order_id": 5, "remaining": 0}, recorder.now())
    paid = recorder.pay("c1", "s", 5)
    paid.landed("paid", recorder.now())
    watched = recorder.pay("c2", "s", 5)
    watched.landed("expired", recorder.now())  # not what a payment ends in: still unknown
    recorder.final("s", 0, [("k1", 5, "paid")])
    reset, bought, first, second, final = read(recorder.write(tmp_path / "h.jsonl"))
    assert reset.window == 2.5 and bought.order_id == 5
    assert (first.outcome, first.result, second.outcome, second.result) == (OK, "paid", UNKNOWN, None)
    assert final.orders == [("k1", 5, "paid")]


@pytest.mark.parametrize("line", [
    '{"type": "pay", "id": 1, "client": "c", "sku": "s", "order_id": 5, "invoke": 1, "complete": 2, '
    '"outcome": "ok"}',
    '{"type": "pay", "id": 1, "client": "c", "sku": "s", "order_id": 5, "invoke": 1, "complete": 2, '
    '"outcome": "failed", "result": "paid"}',
    '{"type": "final", "sku": "s", "remaining": 0, "orders": [["k", 5, "gone"]], "at": 3}',
])
def test_a_payment_says_its_result_and_an_order_a_known_status(line):
    with pytest.raises(HistoryError):
        list(parse([line]))
