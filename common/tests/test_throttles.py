"""What a per-address count counts: one client, whatever the address family."""

import pytest

from common.throttles import bucket


@pytest.mark.parametrize(("address", "counted_as"), [
    ("203.0.113.7", "203.0.113.7"),
    ("2001:db8:1:2::1", "2001:db8:1:2::/64"),
    ("2001:db8:1:2:ffff:ffff:ffff:ffff", "2001:db8:1:2::/64"),  # the same subscriber
    ("2001:DB8:1:3:0:0:0:9", "2001:db8:1:3::/64"),  # the next /64: another one
    ("::ffff:203.0.113.7", "203.0.113.7"),  # an IPv4 client of an IPv6 socket
    ("::1", "::/64"),
    ("not an address", "not an address"),
])
def test_an_ipv6_client_is_its_64_and_an_ipv4_one_its_address(address, counted_as):
    assert bucket(address) == counted_as
