"""A signed-in buyer's Idempotency-Key as the orders keep it, and read back."""

from hypothesis import given
from hypothesis import strategies as st

from common.keys import KEY_MAX_LENGTH, key_scoped, key_sent

# A buyer's name (Django's username validator: letters, digits and @.+-_) and a key
# (1 to 128 visible ASCII characters), as the purchase admits them.
names = st.from_regex(r"[\w.@+-]{1,64}", fullmatch=True)
keys = st.text(st.characters(min_codepoint=0x21, max_codepoint=0x7E), min_size=1, max_size=128)


@given(names, keys, names, keys)
def test_two_buyers_or_two_keys_are_kept_apart_and_fit_the_column(a, key_a, b, key_b):
    kept_a, kept_b = key_scoped(a, key_a), key_scoped(b, key_b)
    assert len(kept_a) <= KEY_MAX_LENGTH
    assert (kept_a == kept_b) == ((a, key_a) == (b, key_b))


@given(names, keys)
def test_a_key_is_read_back_as_it_was_sent_unless_kept_as_a_digest(buyer, key):
    kept = key_scoped(buyer, key)
    assert key_sent(buyer, kept) == (key if kept == f"{buyer}/{key}" else kept)
    assert kept.startswith("~") == (len(buyer) + 1 + len(key) > KEY_MAX_LENGTH)
