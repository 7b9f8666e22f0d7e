"""A load run's buyers on the stack (``loadtest.buyers``): those a process made in the
stack's own database serve its next run, and their tokens still buy; the tests' buyers
made ahead are each a buyer of their own."""

import uuid

import pytest

from loadtest import buyers
from loadtest.buyers import MadeBuyers, buyer_tokens
from loadtest.client import FlashsaleClient


@pytest.fixture
def made(monkeypatch) -> list[int]:
    """The count of each run of the real buyers_make, as it runs."""
    counts = []
    real = buyers.buyers_file

    def counted(*args, **kwargs):
        counts.append(kwargs["count"])
        return real(*args, **kwargs)

    monkeypatch.setattr(buyers, "buyers_file", counted)
    return counts


def test_the_stacks_buyers_made_once_serve_again_until_more_are_asked(stack_config, made):
    prefix = f"again-{uuid.uuid4().hex[:6]}-"
    first = buyer_tokens(stack_config, prefix=prefix, count=3)
    again = buyer_tokens(stack_config, prefix=prefix, count=2)
    assert again == dict(list(first.items())[:2]) and made == [3]
    assert len(buyer_tokens(stack_config, prefix=prefix, count=4)) == 4 and made == [3, 4]
    assert len(buyer_tokens(stack_config, prefix=prefix, count=4, hours=2.0)) == 4 and made == [3, 4, 4]

    client = FlashsaleClient.for_stack(stack_config)
    sku = f"buyers-again-{uuid.uuid4().hex[:6]}"
    client.reset(sku, 5)
    buyer = FlashsaleClient(stack_config.base_url, tokens=again)
    answers = [buyer.order(sku, 1, name).status_code for name in again]
    assert answers == [201, 201]
    assert client.audit(sku)["orders"] == 2


def test_buyers_made_ahead_are_each_labels_own_and_one_batch_serves_many(stack_config, made, monkeypatch):
    monkeypatch.setattr(buyers, "MADE_AHEAD", 3)
    monkeypatch.setattr(buyers, "_ahead", {})
    one, other = MadeBuyers(stack_config), MadeBuyers(stack_config)
    one.signed_up(["a", "b"])
    assert made == [3] and one["a"] == one["a"] and len({one["a"], one["b"]}) == 2
    assert len({one["a"], one["b"], other["a"]}) == 3 and made == [3]  # the batch's third
    assert other["b"] not in (one["a"], one["b"], other["a"]) and made == [3, 3]  # a batch more
    assert sorted(one) == ["a", "b"] and len(other) == 2

    assert stack_config.buyer_auth  # the suite's stacks take the buyer from credentials
    client = FlashsaleClient.for_stack(stack_config, tokens=one)
    sku = f"buyers-ahead-{uuid.uuid4().hex[:6]}"
    client.reset(sku, 5)
    placed = client.order(sku, 1, "a")
    assert placed.status_code == 201, placed.text
    order_id = placed.json()["order_id"]
    # Its buyer's alone: to the other labels' buyers, of either object, it is not found.
    assert client.order_detail(order_id, "a").status_code == 200
    assert client.order_detail(order_id, "b").status_code == 404
    assert FlashsaleClient(client.base_url, tokens=other).order_detail(order_id, "a").status_code == 404
