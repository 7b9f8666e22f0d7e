"""A load run's buyers on the stack (``loadtest.buyers``): those a process made in the
stack's own database serve its next run, and their tokens still buy."""

import uuid

from loadtest import buyers
from loadtest.buyers import buyer_tokens
from loadtest.client import FlashsaleClient


def test_the_stacks_buyers_made_once_serve_again_until_more_are_asked(stack_config, monkeypatch):
    made = []
    real = buyers.buyers_file

    def counted(*args, **kwargs):  # the real command, counted
        made.append(kwargs["count"])
        return real(*args, **kwargs)

    monkeypatch.setattr(buyers, "buyers_file", counted)
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
