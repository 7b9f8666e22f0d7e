"""Who a client is to nginx, on a real nginx. It counts a client as the apps do
(``common.throttles.bucket``): an IPv4 address as itself, an IPv6 address as its /64
(the template's map against Python's ``ipaddress`` over many addresses, and the
rendered config's rates over addresses a trusted proxy names). And it serves the
admin site only to the addresses ``ADMIN_ALLOW`` names."""

from __future__ import annotations

import ipaddress
import random
import re
from collections.abc import Iterator

import pytest
import requests

from stack.config import ROOT
from stack.scratch import free_port

from .nginx_scratch import rendered, running_nginx

pytestmark = pytest.mark.server  # each test starts an nginx of its own

TEMPLATE = ROOT / "nginx/nginx.conf.template"


def expected(address: str) -> str:
    """What the map should say: the IPv4 address, or the /64's first four groups as
    nginx writes them (lowercase hex, no leading zeros)."""
    ip = ipaddress.ip_address(address)
    if ip.version == 6 and ip.ipv4_mapped is not None:
        return str(ip.ipv4_mapped)
    if ip.version == 4:
        return address
    groups = ip.exploded.split(":")[:4]
    return ":".join(f"{int(g, 16):x}" for g in groups)


def addresses(rng: random.Random) -> Iterator[str]:
    """IPv6 addresses with runs of zero groups in every place and of every length (how
    nginx compresses them decides which of the map's lines reads them), a few
    IPv4-mapped and IPv4 ones."""
    yield from ("::", "::1", "1::", "2001:db8::1", "2001:db8:0:1::", "2001:db8:0:0:1::1", "fe80::1:2:3:4",
                "::1:2:3:4:5", "0:0:0:1:2:3:4:5", "1:0:0:0:0:0:0:2", "::ffff:10.1.2.3", "10.1.2.3")
    for _ in range(3000):
        groups = [rng.choice((0, rng.randrange(1, 16), rng.randrange(65536))) for _ in range(8)]
        start, length = rng.randrange(8), rng.randrange(9)
        groups[start:start + length] = [0] * len(groups[start:start + length])
        yield str(ipaddress.IPv6Address(b"".join(g.to_bytes(2, "big") for g in groups)))


def test_the_map_buckets_every_ipv6_address_by_its_64_and_ipv4_by_itself(tmp_path):
    block = re.search(r"^    map \$remote_addr \$client_bucket \{.*?^    \}$", TEMPLATE.read_text(),
                      re.M | re.S).group(0)
    port = free_port()
    conf = tmp_path / "nginx.conf"
    conf.write_text(f"""daemon off;
pid {tmp_path}/nginx.pid;
events {{}}
http {{
    access_log off;
    client_body_temp_path {tmp_path}; proxy_temp_path {tmp_path}; fastcgi_temp_path {tmp_path};
    uwsgi_temp_path {tmp_path}; scgi_temp_path {tmp_path};
    set_real_ip_from 127.0.0.1;
    real_ip_header X-Client;
{block}
    server {{
        listen 127.0.0.1:{port};
        location / {{ return 200 "$client_bucket"; }}
    }}
}}
""")
    rng = random.Random(64)
    with running_nginx(conf, tmp_path, port), requests.Session() as session:
        wrong = {}
        for address in addresses(rng):
            seen = session.get(f"http://127.0.0.1:{port}/", headers={"X-Client": address}, timeout=5).text
            if seen != expected(address):
                wrong[address] = seen
    assert wrong == {}


def test_the_rates_count_one_64_once_and_the_next_64_apart(tmp_path):
    port = free_port()
    conf = rendered(tmp_path, port, TRUSTED_PROXIES="127.0.0.1", PURCHASE_RATE="1")

    def buys(address: str, times: int) -> list[int]:
        return [requests.post(f"http://127.0.0.1:{port}/api/orders", json={"sku": "s", "quantity": 1},
                              headers={"Host": "localhost", "X-Forwarded-For": address},
                              timeout=5).status_code for _ in range(times)]

    prefix = f"2001:db8:{random.randrange(65536):x}:{random.randrange(65535):x}"
    next_64 = ":".join(prefix.split(":")[:3] + [f"{int(prefix.split(':')[3], 16) + 1:x}"])
    with running_nginx(conf, tmp_path, port):
        # The rate and one second's burst, then 429: the /64's addresses share them...
        shared = buys(f"{prefix}::1", 1) + buys(f"{prefix}:1:2:3:4", 1) + buys(f"{prefix}::ffff", 2)
        # ...the next /64 and an IPv4 address each have their own.
        apart = buys(f"{next_64}::1", 2) + buys("192.0.2.7", 2)
    assert shared == [502, 502, 429, 429]
    assert apart == [502, 502, 502, 502]


def test_the_admin_site_is_served_to_the_allowed_addresses_only(tmp_path):
    port = free_port()

    def ask(path: str, client: str | None = None) -> requests.Response:
        headers = {"Host": "localhost"} | ({"X-Forwarded-For": client} if client else {})
        return requests.get(f"http://127.0.0.1:{port}{path}", headers=headers, timeout=5)

    with running_nginx(rendered(tmp_path, port, TRUSTED_PROXIES="127.0.0.1"), tmp_path, port):
        refused = ask("/admin/login/", "192.0.2.7")
        by_default = [ask("/admin/login/").status_code, ask("/admin/", "::1").status_code,
                      ask("/api/admin/races/1", "192.0.2.7").status_code, ask("/", "192.0.2.7").status_code]
    assert refused.status_code == 403 and refused.headers["Content-Type"] == "application/json"
    assert refused.json()["error"] == "permission_denied"
    assert by_default == [502, 502, 502, 502]  # loopback's admin site, anyone's admin API and shop
    (tmp_path / "nginx.pid").unlink(missing_ok=True)
    with running_nginx(rendered(tmp_path, port, TRUSTED_PROXIES="127.0.0.1", ADMIN_ALLOW="192.0.2.0/24"),
                       tmp_path, port):
        allowed = [ask("/admin/login/", "192.0.2.7").status_code, ask("/admin/login/").status_code]
    assert allowed == [502, 403]
