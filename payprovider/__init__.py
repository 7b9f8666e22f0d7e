"""A local stand-in for Stripe's test mode: what the stack pays with, since no
payment provider can be reached from here. Not product code: flashsale's payments
app talks to it with the ``stripe`` client library, as it would to Stripe.

What it keeps of Stripe's semantics:

- **The API**, as far as flashsale uses it: ``POST /v1/payment_intents`` (with
  ``confirm=true`` and a test payment method: ``pm_card_visa`` succeeds,
  ``pm_card_chargeDeclined`` is declined with a 402 ``card_error``),
  ``POST /v1/payment_intents/<id>/confirm`` (an intent that waits for a payment
  method, a declined one again; a succeeded one is a 400
  ``payment_intent_unexpected_state``), ``GET /v1/payment_intents/<id>``,
  ``POST /v1/refunds``, and the lists ``GET
  /v1/payment_intents`` and ``GET /v1/refunds`` (newest first, ``limit`` and
  ``starting_after``). Form-encoded requests,
  bearer API key, JSON answers and error bodies in Stripe's shape.
- **Idempotency keys**: a request repeated with its ``Idempotency-Key`` gets the first
  answer again; the same key with other parameters is a 400 ``idempotency_error``.
- **Webhooks**: each event is POSTed to the endpoint signed as Stripe signs
  (``Stripe-Signature: t=<unix time>,v1=<HMAC-SHA256 of "<t>.<body>">``, signed
  afresh at each attempt), at least once: a delivery that is not answered 2xx is
  tried again with backoff. Knobs make it worse the ways Stripe can be: a share of
  events delivered twice, a random delay per delivery (so events overtake each
  other), and a share of payments declined whatever the card. With more than one
  deliverer, deliveries run at once, as Stripe's do; a storm delivers a share of
  events up to three times, concurrently and out of order.

Not Stripe's, both with the API key: ``POST /_stand-in/knobs`` changes the delivery
knobs while it runs (``duplicate``, ``copies``, ``delay_ms``, ``workers``), for a
nemesis that turns a calm provider into a storm mid-sale and calms it again; ``GET
/_stand-in/deliveries`` says how many deliveries wait or are under way, for a
benchmark that reads what the webhooks did only once they are all delivered.
"""
