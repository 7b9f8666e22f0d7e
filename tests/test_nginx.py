"""nginx speaks the API's contract too: the errors it produces itself (a body too
large, no instance to take a request, a path or method it refuses) are JSON in the
one error shape, with Retry-After where a retry makes sense, and bodies never touch
a temp file."""

import json
import re
import signal
import time
import uuid
from concurrent.futures import ThreadPoolExecutor

import pytest
import requests

from loadtest.client import FlashsaleClient
from stack.control import docs, reconfigure
from stack.supervisor import Supervisor

pytestmark = pytest.mark.e2e


def signed(client, buyer: str = "u1") -> dict:
    """``buyer``'s credentials, when the stack takes the buyer from them (signed up now:
    before a test stops the instances or slows nginx down)."""
    return client.as_buyer(buyer)[1]


def test_a_body_past_16_kb_is_413_json_and_nothing_is_written(stack_apps):
    client = stack_apps()
    client.reset("nginx-413", 5)
    body = json.dumps({"sku": "nginx-413", "quantity": 1, "user_id": "u" * 100_000})
    response = requests.post(f"{client.base_url}/api/orders", data=body, timeout=10,
                             headers={"Content-Type": "application/json", "Idempotency-Key": "k-413",
                                      **signed(client)})
    assert response.status_code == 413
    assert response.headers["Content-Type"] == "application/json"
    assert response.json()["error"] == "too_large" and response.json()["message"]
    assert client.audit("nginx-413")["orders"] == 0
    # Under the limit, the body reaches the app, which judges it (a user_id too long).
    body = json.dumps({"sku": "nginx-413", "quantity": 1, "user_id": "u" * 10_000})
    response = requests.post(f"{client.base_url}/api/orders", data=body, timeout=10,
                             headers={"Content-Type": "application/json", **signed(client)})
    assert response.status_code == 400 and response.json()["error"] == "invalid"


def test_no_instance_to_take_a_purchase_is_502_json_with_retry_after(stack_apps, stack_config):
    client = stack_apps()
    signed(client)
    supervisor = Supervisor(stack_config)
    try:
        for name in stack_config.app_names:
            supervisor.stop(name)
        response = client.order("nginx-502", 1, "u1", key="k-502")
    finally:
        reconfigure(stack_config)  # starts the instances again and waits until they answer
    assert response.status_code == 502
    assert response.headers["Content-Type"] == "application/json"
    assert response.headers["Retry-After"] == "1"
    _request_id(response)
    body = response.json()
    assert (body["error"], body["backend"]) == ("unavailable", "app") and "Idempotency-Key" in body["message"]


def test_an_admin_action_outlasts_the_purchases_10_s_and_a_purchase_does_not(stack_apps, stack_config):
    """Every instance frozen for 12 s: a purchase is 504 at nginx's 10 s (it commits
    nothing past its 8 s deadline anyway); a reset, whose work grows with the sale it
    wipes, is waited for and done once they thaw."""
    client = stack_apps()
    client.reset("nginx-slow-admin", stock=5)
    signed(client)
    supervisor = Supervisor(stack_config)
    with ThreadPoolExecutor(2) as pool:
        try:
            for name in stack_config.app_names:
                supervisor.signal_group(name, signal.SIGSTOP)
            purchase = pool.submit(client.order, "nginx-slow-admin", 1, "u1", key=f"k-{uuid.uuid4().hex}")
            reset = pool.submit(client.reset, "nginx-slow-admin", 7)
            time.sleep(12)
        finally:
            for name in stack_config.app_names:
                supervisor.signal_group(name, signal.SIGCONT)
        purchase, reset = purchase.result(), reset.result()  # the reset raises unless 2xx
    assert purchase.status_code == 504 and purchase.json()["error"] == "timeout"
    _request_id(purchase)
    assert reset["sku"] == "nginx-slow-admin"
    assert client.audit("nginx-slow-admin")["initial_stock"] == 7


def test_bodies_never_need_a_directory_nginx_workers_cannot_enter(stack_apps, stack_config):
    """The stack runs as root, nginx's workers as nobody; a checkout under a 0700
    home is closed to them. Closed here: nginx's own run directory."""
    client = stack_apps()
    run_dir = stack_config.run_dir / "nginx"
    mode = run_dir.stat().st_mode
    body = json.dumps({"sku": "nginx-0700", "quantity": 1, "user_id": "u" * 15_000})
    try:
        run_dir.chmod(0o700)
        response = requests.post(f"{client.base_url}/api/orders", data=body, timeout=10,
                                 headers={"Content-Type": "application/json", **signed(client)})
        schema = requests.get(f"{client.base_url}/api/schema", timeout=10)
    finally:
        run_dir.chmod(mode)
    assert response.status_code == 400 and response.json()["error"] == "invalid"  # the app judged it
    assert schema.status_code == 200 and "paths" in schema.text


def test_what_nginx_refuses_itself_is_json_too(stack_apps):
    client = stack_apps()
    # A NUL in the path: nginx's URI parser refuses it before any instance sees it.
    response = requests.get(f"{client.base_url}/api/products/a%00b", timeout=10)
    assert response.status_code == 400
    assert response.headers["Content-Type"] == "application/json"
    assert response.json()["error"] == "invalid" and response.json()["message"]
    # TRACE: refused by nginx, with the methods it would take.
    response = requests.request("TRACE", f"{client.base_url}/api/orders", timeout=10)
    assert response.status_code == 405
    assert response.headers["Content-Type"] == "application/json"
    assert response.headers["Allow"] == "GET, HEAD, POST, OPTIONS"
    assert response.json()["error"] == "method_not_allowed"
    # A path longer than nginx's header buffers (8 KB).
    response = requests.get(f"{client.base_url}/api/products/{'a' * 9000}", timeout=10)
    assert response.status_code == 414 and response.json()["error"] == "too_large"
    # A deeply nested body passes nginx (10 KB) and the app refuses it: 400, not 500.
    response = requests.post(f"{client.base_url}/api/orders", data="[" * 5000 + "]" * 5000, timeout=10,
                             headers={"Content-Type": "application/json", **signed(client)})
    assert response.status_code == 400 and response.json()["error"] == "invalid"


def test_static_files_are_nginxs_with_a_years_cache_and_never_reach_django(stack_apps, stack_config):
    client = stack_apps()
    manifest = json.loads((stack_config.static_root / "staticfiles.json").read_text())
    hashed = manifest["paths"]["admin/css/base.css"]  # collectstatic ran in `stack up`
    assert hashed != "admin/css/base.css"  # its name carries its content's hash
    response = requests.get(f"{client.base_url}/static/{hashed}", timeout=10)
    assert response.status_code == 200 and response.headers["Content-Type"] == "text/css"
    assert response.headers["Cache-Control"] == "public, max-age=31536000, immutable"
    # Every answer Django gives carries its arrival stamp; nginx's own do not.
    assert "Server-Timing" not in response.headers
    assert "arrival" in requests.get(f"{client.base_url}/healthz", timeout=10).headers["Server-Timing"]
    missing = requests.get(f"{client.base_url}/static/no-such-file.css", timeout=10)
    assert missing.status_code == 404 and missing.json()["error"] == "not_found"
    assert "Server-Timing" not in missing.headers



def test_the_docs_site_is_nginxs_at_docs_once_built(stack_apps, stack_config):
    client = stack_apps()
    docs(stack_config)  # what `make docs` runs
    home = requests.get(f"{client.base_url}/docs/", timeout=10)
    assert home.status_code == 200 and home.headers["Content-Type"].startswith("text/html")
    assert "flashsale" in home.text and "Server-Timing" not in home.headers  # never Django's
    page = requests.get(f"{client.base_url}/docs/strategies/redis/", timeout=10)
    assert page.status_code == 200 and "Redisson" in page.text
    bare = requests.get(f"{client.base_url}/docs", timeout=10, allow_redirects=False)
    assert bare.status_code == 301 and bare.headers["Location"].endswith("/docs/")
    missing = requests.get(f"{client.base_url}/docs/no-such-page/", timeout=10)
    assert missing.status_code == 404 and missing.json()["error"] == "not_found"

def _product(client, sku: str, **headers) -> requests.Response:
    return requests.get(f"{client.base_url}/api/products/{sku}", headers=headers, timeout=10)


def _half_second(response: requests.Response) -> int:
    """The half-second nginx answered in (its Server-Timing ``now``)."""
    return int(float(response.headers["Server-Timing"].rsplit("now;desc=", 1)[1]) * 2)


def _kept_read(client, sku: str, *, within_s: float = 60.0) -> requests.Response:
    """The second of two reads of ``sku``, one after the other, that both reached nginx
    in one half-second: each sent and answered in it (the client's clock is nginx's, on
    one machine). On a machine where a read takes longer, reads go on until two do."""
    deadline = time.monotonic() + within_s
    previous: requests.Response | None = None
    while time.monotonic() < deadline:
        sent = int(time.time() * 2)
        response = _product(client, sku)
        if _half_second(response) != sent:
            previous = None  # answered in a later half-second than it was sent in
        elif previous is not None and _half_second(previous) == sent:
            return response
        else:
            previous = response
    raise AssertionError(f"no two reads of {sku} reached nginx in one half-second in {within_s:.0f} s")


def _next_half_second() -> None:
    """Waits until the client's clock, which is nginx's, is past the half-second it is in."""
    now = time.time()
    time.sleep((int(now * 2) + 1) / 2 - now + 0.01)


def _request_id(response: requests.Response) -> str:
    """The answer's one ``X-Request-ID``: nginx's name for this request (32 hex digits)."""
    ids = response.raw.headers.getlist("X-Request-ID")
    assert len(ids) == 1 and re.fullmatch(r"[0-9a-f]{32}", ids[0]), (response.status_code, ids)
    return ids[0]


def test_a_cached_answer_carries_the_id_of_the_request_it_answers(stack_apps):
    """Not that of the request that filled the cache (the instance's header is kept
    with the answer; nginx drops it and sets its own)."""
    client = stack_apps()
    sku = f"nginx-cache-id-{uuid.uuid4().hex[:6]}"
    client.reset(sku, 5)
    for _ in range(5):
        answers = [_product(client, sku) for _ in range(3)]
        if {a.headers["X-Cache"] for a in answers[1:]} == {"HIT"}:
            break
    assert [a.headers["X-Cache"] for a in answers][1:] == ["HIT", "HIT"]
    assert len({_request_id(a) for a in answers}) == 3
    # A client's own X-Request-ID names nothing: nginx's is the one.
    sent = uuid.uuid4().hex
    assert _request_id(_product(client, sku, **{"X-Request-ID": sent})) != sent


def test_every_answer_nginx_gives_itself_carries_the_requests_id(stack_apps, stack_config):
    client = stack_apps()
    base = client.base_url
    answers = {
        404: requests.get(f"{base}/metrics", timeout=10),
        421: requests.get(f"{base}/healthz", headers={"Host": "evil.example"}, timeout=10),
        400: requests.get(f"{base}/api/products/a%00b", timeout=10),
        405: requests.request("TRACE", f"{base}/api/orders", timeout=10),
        413: requests.post(f"{base}/api/orders", data="x" * 20_000, timeout=10,
                           headers={"Content-Type": "application/json"}),
        414: requests.get(f"{base}/api/products/{'a' * 9000}", timeout=10),
        # and the instances' answers through nginx: one id, nginx's
        200: requests.get(f"{base}/healthz", timeout=10),
    }
    for status, response in answers.items():
        assert response.status_code == status
        _request_id(response)
    assert len({_request_id(r) for r in answers.values()}) == len(answers)
    static = requests.get(f"{base}/static/no-such-file.css", timeout=10)
    assert static.status_code == 404 and _request_id(static)


def test_nginx_keeps_a_product_answer_a_half_second_per_product_and_never_one_for_another(stack_apps):
    client = stack_apps()
    a, b = (f"nginx-cache-{name}-{uuid.uuid4().hex[:6]}" for name in "ab")
    client.reset(a, 5)
    client.reset(b, 7)
    first = _product(client, a)
    assert first.headers["X-Cache"] == "MISS"
    # The key carries the half-second: a second read that reached nginx in the same
    # one is the kept answer.
    again = _kept_read(client, a)
    assert again.headers["X-Cache"] == "HIT", "a read in the same half-second was not answered from the cache"
    other = _product(client, b)
    assert first.json() == again.json() and again.json()["stock"] == 5
    assert (other.json()["sku"], other.json()["stock"]) == (b, 7)
    assert "now;desc=" in again.headers["Server-Timing"]  # the time of this answer, for the page's clock
    assert client.order(a, 1, "u1").status_code == 201
    # From the next half-second the purchase shows: that key's fill reads the row after it.
    _next_half_second()
    assert _product(client, a).json()["stock"] == 4, "the cached product did not show the purchase"


def test_nginx_keeps_a_products_404_for_its_half_second_only(stack_apps):
    """A crowd asking for a sku not on sale yet reads the database once per
    half-second; once it is on sale, it shows from the next half-second."""
    client = stack_apps()
    sku = f"nginx-cache-404-{uuid.uuid4().hex[:6]}"
    first = _product(client, sku)
    assert first.status_code == 404 and first.headers["X-Cache"] == "MISS"
    again = _kept_read(client, sku)
    assert again.status_code == 404 and again.headers["X-Cache"] == "HIT"
    assert again.json()["error"] == "not_found"
    client.reset(sku, 3)
    _next_half_second()  # that key's fill reads the row after the reset
    now = _product(client, sku)
    assert now.status_code == 200 and now.json()["stock"] == 3, "the kept 404 outlived its half-second"


def _statements(stack_config) -> int:
    """SELECTs MariaDB has run since it started (Com_select): what a product read
    costs it, without the SETs a worker's new connection sends first."""
    import MySQLdb

    db = MySQLdb.connect(unix_socket=str(stack_config.run_dir / "mariadb" / "mysqld.sock"), user="root")
    try:
        cursor = db.cursor()
        cursor.execute("SHOW GLOBAL STATUS LIKE 'Com_select'")
        return int(cursor.fetchone()[1])
    finally:
        db.close()


def _statements_settled(stack_config, *, quiet_s: float = 0.5, within_s: float = 10.0) -> int:
    """``_statements`` once MariaDB has run none for ``quiet_s``: what was paused may
    have left a request in flight (a scrape of an app's /metrics reads the live sales),
    and its SELECTs must land before the count starts, not during it."""
    deadline = time.monotonic() + within_s
    count = _statements(stack_config)
    while time.monotonic() < deadline:
        time.sleep(quiet_s)
        now = _statements(stack_config)
        if now == count:
            return count
        count = now
    raise AssertionError(f"MariaDB never went {quiet_s} s without a SELECT in {within_s} s")


# Alone: Com_select is the whole server's, and the run beside the stack's tests sends
# its own statements to the same MariaDB (to a database of its own).
@pytest.mark.exclusive
@pytest.mark.parametrize("on_sale", [True, False], ids=["product", "unknown-sku"])
def test_a_query_string_or_an_escape_does_not_take_the_product_read_past_the_cache(
        stack_apps, stack_config, on_sale):
    client = stack_apps()
    sku = f"nginx-cache-q-{uuid.uuid4().hex[:6]}"
    if on_sale:
        client.reset(sku, 5)
    spellings = [f"{sku}?r={uuid.uuid4().hex}" for _ in range(30)]
    spellings += [f"{sku}?{uuid.uuid4().hex}=1&sku=x" for _ in range(10)]
    spellings += ["%6E" + sku[1:], sku[:-1] + f"%{ord(sku[-1]):02X}"]  # an escaped letter
    # Not while counting, what asks MariaDB on a schedule of its own: its exporter
    # (every 2 s), Prometheus (its scrapes make the apps read the live sales), the
    # expirer and the race runner (their polls).
    with Supervisor(stack_config).paused(["mysqld-exporter", "prometheus", "expirer", "racer"]):
        before = _statements_settled(stack_config)
        answers = [_product(client, spelling) for spelling in spellings]
        ran = _statements(stack_config) - before
    assert {a.status_code for a in answers} == ({200} if on_sale else {404})
    assert all(a.json().get("sku", sku) == sku for a in answers)
    misses = sum(a.headers["X-Cache"] != "HIT" for a in answers)
    half_seconds = len({_half_second(a) for a in answers})
    # One fill per half-second the reads spanned (plus one that lost a lock's wait),
    # a few statements each: every request reached MariaDB before (over 42).
    assert misses <= 2 * half_seconds, (misses, half_seconds)
    assert ran < 3 * misses + 4, (ran, misses)


def test_an_unknown_host_is_421_json_and_reaches_no_instance(stack_apps, stack_config):
    client = stack_apps()
    sku = f"nginx-host-{uuid.uuid4().hex[:6]}"
    client.reset(sku, 5)
    for host in ("evil.example", "127.0.0.1.nip.io", "LOCALHOST.evil"):
        response = requests.post(f"{client.base_url}/api/orders", headers={"Host": host}, timeout=10,
                                 json={"sku": sku, "quantity": 1, "user_id": "u"})
        assert response.status_code == 421, host
        assert response.headers["Content-Type"] == "application/json"
        assert response.json()["error"] == "unknown_host"
        assert "Server-Timing" not in response.headers  # never an instance's answer
    assert client.audit(sku)["orders"] == 0
    served = requests.get(f"{client.base_url}/healthz", headers={"Host": "localhost"}, timeout=10)
    assert served.status_code == 200
    assert served.headers["Server"] == "nginx"  # no version
    assert "X-Upstream" not in served.headers  # unless asked for


def test_past_its_rate_an_address_is_429_json_from_nginx_and_nothing_is_written(stack_apps):
    buyers = [f"u{n}" for n in range(10)]
    tokens = stack_apps().tokens
    if tokens is not None:
        tokens.signed_up(buyers)  # at the stack's own rates
    client = stack_apps(nginx_purchase_rate=1, nginx_read_rate=5, nginx_show_upstream=True)
    client.tokens = tokens
    sku = f"nginx-rate-{uuid.uuid4().hex[:6]}"
    client.reset(sku, 50)
    # At once, as the reads below: one after another, a purchase on a busy machine can
    # take as long as the rate allows between two.
    with ThreadPoolExecutor(len(buyers)) as pool:
        purchases = list(pool.map(  # a client each: a requests session is one thread's
            lambda buyer: FlashsaleClient(client.base_url, tokens=tokens).order(sku, 1, buyer), buyers))
    statuses = [p.status_code for p in purchases]
    assert 201 in statuses and 429 in statuses, statuses
    refused = next(p for p in purchases if p.status_code == 429)
    assert refused.headers["Content-Type"] == "application/json"
    assert refused.headers["Retry-After"] == "1"
    assert refused.json()["error"] == "throttled" and refused.json()["message"]
    assert "Server-Timing" not in refused.headers  # nginx's own answer
    assert len({_request_id(p) for p in purchases}) == len(purchases)  # the 429s' too, each its own
    with ThreadPoolExecutor(20) as pool:
        reads = [response.status_code for response in pool.map(lambda _: _product(client, sku), range(20))]
    assert 200 in reads and 429 in reads, reads
    served = next(p for p in purchases if p.status_code == 201)
    assert served.headers["X-Upstream"].startswith("127.0.0.1:")  # asked for here
    time.sleep(2)  # the reads' bucket fills again
    assert client.audit(sku)["orders"] == statuses.count(201)


def test_nginx_keeps_no_admin_or_audit_answer(stack_apps):
    client = stack_apps()
    sku = f"nginx-cache-admin-{uuid.uuid4().hex[:6]}"
    auth = {"Authorization": f"Token {client.admin_token}"}
    for stock in (3, 4):  # the same reset twice: each answered by the app, nothing kept
        reset = requests.post(f"{client.base_url}/api/admin/products/{sku}/reset", json={"stock": stock},
                              headers=auth, timeout=10)
        assert reset.status_code == 200 and "X-Cache" not in reset.headers
    audit_url = f"{client.base_url}/api/products/{sku}/audit"
    first = requests.get(audit_url, headers=auth, timeout=10)
    assert first.json()["orders"] == 0 and "X-Cache" not in first.headers
    assert client.order(sku, 1, "u1").status_code == 201
    assert requests.get(audit_url, headers=auth, timeout=10).json()["orders"] == 1  # at once: never kept


def test_anyone_reads_the_audits_summary_and_only_the_admin_the_full_audit(stack_apps):
    client = stack_apps()
    sku = f"nginx-summary-{uuid.uuid4().hex[:6]}"
    client.reset(sku, 5)
    assert client.order(sku, 2, "u1").status_code == 201
    full = f"{client.base_url}/api/products/{sku}/audit"
    refused = requests.get(full, timeout=10)
    assert refused.status_code == 401 and refused.json()["error"] == "not_authenticated"
    assert requests.get(full, headers={"Authorization": "Token wrong"}, timeout=10).status_code == 401
    audit = client.audit(sku)  # with the stack's admin token
    assert (audit["orders"], audit["flow_rows"], audit["consistent"]) == (1, 1, True)
    # The summary: no token; kept a second for every instance, so within about that
    # it shows the order (both instances answer in turn, from the same entry).
    deadline = time.monotonic() + 5
    while (summary := client.summary(sku))["orders"] != 1:
        assert time.monotonic() < deadline, summary
        time.sleep(0.1)
    assert {k: summary[k] for k in ("orders", "sold", "remaining", "consistent")} == {
        "orders": 1, "sold": 2, "remaining": 3, "consistent": True}
    assert "flow_rows" not in summary and "gate" not in summary


def test_behind_a_trusted_proxy_the_rates_count_the_addresses_it_forwards(stack_apps):
    """NGINX_TRUSTED_PROXIES: the stack's own address stands for a TLS terminator."""
    credentials = {buyer: stack_apps().as_buyer(buyer) for buyer in ("203.0.113.1", "203.0.113.2")}
    client = stack_apps(nginx_purchase_rate=1, nginx_trusted_proxies="127.0.0.1")
    sku = f"nginx-real-ip-{uuid.uuid4().hex[:6]}"
    client.reset(sku, 50)

    def buys(buyer: str) -> list[int]:
        """Four purchases at once (one after another, each may take as long as the
        rate allows between two on a busy machine), their statuses in order."""
        body, headers = credentials[buyer]

        def buy(_):
            return requests.post(f"{client.base_url}/api/orders", timeout=10,
                                 json={"sku": sku, "quantity": 1, **body},
                                 headers={"X-Forwarded-For": buyer, **headers}).status_code

        with ThreadPoolExecutor(4) as pool:
            return sorted(pool.map(buy, range(4)))

    # Each buyer has a bucket of its own: the rate, and one second's burst, then 429.
    assert buys("203.0.113.1") == [201, 201, 429, 429]
    assert buys("203.0.113.2") == [201, 201, 429, 429]
