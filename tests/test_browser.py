"""The page in a real browser (Debian's chromium, driven by Playwright) against the
running stack through nginx: it shows the product, buys, and a retry is a replay."""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from urllib.parse import parse_qs

import pytest
from playwright.sync_api import expect

from benchmarks.race_watch import chromium
from stack.control import docs, start_again
from stack.supervisor import Supervisor

pytestmark = pytest.mark.e2e


# How long an expectation waits for the page to show what it should: a bound for a
# page that never does, not for a busy machine (Swagger UI alone took over Playwright's
# 5 s to draw the schema beside the suite's load). A test that needs longer says so.
PATIENCE_MS = 30_000


@pytest.fixture(scope="module")
def browser():
    """One Chromium for this module's tests in a row: its start and Playwright's
    driver's cost more CPU than most of the tests' pages. Not past the module: while
    it runs, Playwright's event loop is this thread's, and Django refuses a database
    query from it (``SynchronousOnlyOperation``), as the next module's tests make."""
    with chromium() as browser:
        yield browser


@pytest.fixture
def page(browser):
    """A page in a new context: no cookie, storage or cache of another test's."""
    expect.set_options(timeout=PATIENCE_MS)
    context = browser.new_context()
    try:
        page = context.new_page()
        page.set_default_timeout(PATIENCE_MS)
        yield page
    finally:
        context.close()


def signed_in(page, buyer_auth: bool) -> None:
    """When the stack takes the buyer from credentials: nobody can buy until a buyer
    is signed in; "continue as a new buyer" signs one in, in one click."""
    if buyer_auth:
        expect(page.locator("#buy-button")).to_be_disabled()
        page.click("#new-buyer")
        expect(page.locator("#sign-out")).to_be_visible()


def test_buy_from_the_page_and_retry_is_a_replay(stack_apps, stack_config, page):
    client = stack_apps()  # the stack as it was started
    client.reset("browser-1", 3, name="Browser phone")
    page.goto(f"{stack_config.base_url}/?sku=browser-1")
    expect(page.locator("#stock")).to_have_text("3")
    expect(page.locator("#name")).to_have_text("Browser phone (browser-1)")
    signed_in(page, stack_config.buyer_auth)
    expect(page.locator("#name")).to_have_text("Browser phone (browser-1)")  # back on the same page

    page.fill("#quantity", "2")
    page.click("#buy-button")
    first = page.locator("#log li").first
    expect(first).to_contain_text("201 order")
    expect(first).to_contain_text("1 left")
    expect(page.locator("#stock")).to_have_text("1")

    page.click("#retry")
    expect(page.locator("#log li").first).to_contain_text("(replayed)")
    page.click("#buy-button")  # 2 more than the 1 left
    expect(page.locator("#log li").first).to_contain_text("409 sold_out")

    expect(page.locator('#audit td[data-k="orders"]')).to_have_text("1")
    expect(page.locator('#audit td[data-k="consistent"]')).to_have_text("yes")
    stack_config.dir("screenshots")
    page.screenshot(path=str(stack_config.run_dir / "screenshots" / "page.png"), full_page=True)

    audit = client.audit("browser-1")
    assert (audit["orders"], audit["remaining"], audit["consistent"]) == (1, 1, True)


def test_an_order_to_pay_counts_down_and_goes_paid_or_back_on_sale(stack_apps, stack_config, page):
    """A sale with a payment window: each order shows its countdown and a Pay button;
    the paid one turns paid (the stand-in provider's webhook), the other one expired
    when the time is up, without a reload, and its unit is on sale again."""
    client = stack_apps()
    sku = f"browser-pay-{uuid.uuid4().hex[:8]}"
    client.reset(sku, 2, strategy="atomic", payment_window_s=4)
    page.goto(f"{stack_config.base_url}/?sku={sku}")
    signed_in(page, stack_config.buyer_auth)
    expect(page.locator("#stock")).to_have_text("2")
    page.click("#buy-button")
    expect(page.locator("#orders li")).to_have_count(1)
    page.click("#buy-button")
    expect(page.locator("#orders li")).to_have_count(2)
    paid, unpaid = page.locator("#orders li").nth(1), page.locator("#orders li").nth(0)
    expect(paid).to_contain_text("pay within")
    paid.locator("button").click()
    expect(page.locator("#log li").first).to_contain_text("202 payment")
    expect(paid.locator(".status")).to_have_text("paid")
    expect(paid.locator("button")).to_be_hidden()
    expect(unpaid.locator(".status")).to_have_text("expired")  # its 4 s, its grace, an expirer pass
    expect(page.locator("#stock")).to_have_text("1")
    stack_config.dir("screenshots")
    page.screenshot(path=str(stack_config.run_dir / "screenshots" / "page-pay.png"), full_page=True)
    audit = client.audit(sku)
    assert (audit["returned_quantity"], audit["ordered_quantity"], audit["consistent"]) == (1, 1, True)


def test_a_session_purchase_needs_its_csrf_token(stack_apps, stack_config, page):
    """The page's buyer buys with the session cookie; a request that rides on that
    cookie from a script without the page's CSRF token is refused, and writes nothing."""
    client = stack_apps(buyer_auth=True)  # the session buys only when buyers sign in
    sku = f"browser-csrf-{uuid.uuid4().hex[:8]}"
    client.reset(sku, 5)
    page.goto(f"{stack_config.base_url}/?sku={sku}")
    signed_in(page, buyer_auth=True)
    buy = """async ([sku, csrf]) => {
        const headers = {"Content-Type": "application/json", "Idempotency-Key": crypto.randomUUID()};
        if (csrf) headers["X-CSRFToken"] = document.querySelector("[name=csrfmiddlewaretoken]").value;
        const body = JSON.stringify({sku, quantity: 1});
        const r = await fetch("/api/orders", {method: "POST", headers, body});
        return [r.status, await r.json()];
    }"""
    status, body = page.evaluate(buy, [sku, False])
    assert (status, body["error"]) == (403, "permission_denied"), body
    assert client.audit(sku)["orders"] == 0
    status, body = page.evaluate(buy, [sku, True])
    assert status == 201, body
    assert client.audit(sku)["orders"] == 1


def test_the_api_docs_open_from_the_page_and_nothing_leaves_the_machine(stack_apps, stack_config, page):
    stack_apps()
    origin = stack_config.base_url
    requested = []
    page.on("request", lambda request: requested.append(request.url))
    page.goto(f"{origin}/")
    page.click("#api-docs")
    expect(page).to_have_url(f"{origin}/api/docs")
    # Swagger UI drew the schema: the purchase's operation, under its own body name.
    expect(page.locator(".swagger-ui .opblock-summary-path", has_text="/api/orders").first).to_be_visible()
    expect(page.get_by_text("PurchaseRequest").first).to_be_visible()
    assert requested and all(url.startswith(origin) for url in requested), \
        [url for url in requested if not url.startswith(origin)]
    assert any("/static/drf_spectacular_sidecar/" in url for url in requested)  # from nginx


def test_the_page_counts_down_on_the_server_clock_and_opens_buy_on_time(stack_apps, stack_config, page):
    """The sale opens 4 s after the reset. The browser's clock is set 1 hour fast, so a
    countdown on the browser's own clock would show the sale open at once."""
    client = stack_apps()
    # Each change of the sale's line is kept with the instant it was made on the
    # machine's clock, so the test judges each of the page's ticks, however late the
    # machine ran them, and not how soon Playwright saw the button change.
    page.add_init_script("""(() => {
        const skew = 3600 * 1000, realNow = Date.now;
        Date.now = () => realNow() + skew;
        window.__ticks = [];
        document.addEventListener("DOMContentLoaded", () => {
            const line = document.getElementById("window");
            new MutationObserver(() => window.__ticks.push([realNow(), line.textContent]))
                .observe(line, {childList: true, characterData: true, subtree: true});
        });
    })();""")
    page.goto(f"{stack_config.base_url}/")
    signed_in(page, stack_config.buyer_auth)  # before the clock starts: a sign-in loads the page again
    sku = f"browser-window-{uuid.uuid4().hex[:8]}"  # new, so no cache in front has seen it
    product = client.reset(sku, 2, starts_in=4)
    opens = datetime.fromisoformat(product["starts_at"])
    page.goto(f"{stack_config.base_url}/?sku={sku}")
    expect(page.locator("#window")).to_contain_text("opens in")
    expect(page.locator("#buy-button")).to_be_disabled()
    expect(page.locator("#buy-button")).to_be_enabled()
    expect(page.locator("#window")).to_have_text("on sale")
    ticks = [(datetime.fromtimestamp(ms / 1000, UTC), text) for ms, text in page.evaluate("window.__ticks")]
    early = [at for at, text in ticks if text.startswith("opens in")]
    first_open = next(at for at, text in ticks if text == "on sale")
    # Not open before the opening on the server's clock (its offset learnt within a
    # round trip), and open at the first tick after it: no later than the longest gap
    # between two of the page's ticks that this run saw.
    slack = timedelta(milliseconds=300)
    gap = max(b - a for a, b in zip(early, [*early[1:], first_open], strict=True))
    assert len(early) >= 2 and max(early) < opens + slack, (opens, early[-3:])
    assert opens - slack <= first_open <= opens + gap + slack, (opens, first_open, gap)
    page.click("#buy-button")
    expect(page.locator("#log li").first).to_contain_text("201 order")


def test_a_race_from_the_page_shows_none_oversell_beside_atomic_holding(stack_apps, stack_config, page):
    stack_apps(strategy="atomic", instances=2, section_delay_ms=20.0)  # as tests/test_races.py races
    page.on("dialog", lambda dialog: dialog.accept(stack_config.admin_token()))  # the Race button asks
    page.goto(f"{stack_config.base_url}/")
    page.click("#race-link")
    expect(page).to_have_title("flashsale · race the strategies")
    for box in page.locator("[name=strategy]").all():
        box.set_checked(box.get_attribute("value") in ("none", "atomic"))
    page.fill("#stock", "50")
    page.fill("#buyers", "400")
    with page.expect_response("**/api/admin/races") as started:
        page.click("#race-button")
    race_id = started.value.json()["id"]

    # The page opened on the newest race there was, if any: this one's end is what counts.
    expect(page.locator("#status")).to_contain_text(f"race {race_id}: finished", timeout=120_000)
    none, atomic = page.locator('.lane[data-strategy="none"]'), page.locator('.lane[data-strategy="atomic"]')
    oversold = int(none.locator('[data-k="oversold"]').inner_text())
    assert oversold > 0
    expect(none.locator('[data-k="oversold"]')).to_have_class("num bad")  # in red
    expect(none.locator(".verdict")).to_have_text(f"oversold by {oversold}")
    expect(atomic.locator('[data-k="oversold"]')).to_have_text("0")
    expect(atomic.locator('[data-k="orders"]')).to_have_text("50")
    expect(atomic.locator(".verdict")).to_have_text("held")
    expect(page.locator("#chart canvas")).to_be_visible()
    stack_config.dir("screenshots")
    page.screenshot(path=str(stack_config.run_dir / "screenshots" / "race.png"), full_page=True)

    with page.expect_download() as download:
        page.click("#download")
    race = json.loads(Path(download.value.path()).read_text())
    assert [lane["verdict"] for lane in race["lanes"]] == [f"oversold by {oversold}", "held"]


def test_a_race_behind_waiting_rooms_shows_each_queue_draining_at_its_rate(stack_apps, stack_config, page):
    """A race whose sales have waiting rooms: every buyer waits its turn in each room
    and buys with its admission (the gate spends it in its sale script, atomic in its
    own); each column shows its room, and the rooms' chart their queues."""
    stack_apps(strategy="atomic", instances=2)
    page.on("dialog", lambda dialog: dialog.accept(stack_config.admin_token()))
    page.goto(f"{stack_config.base_url}/race")
    for box in page.locator("[name=strategy]").all():
        box.set_checked(box.get_attribute("value") in ("atomic", "gate"))
    # 10 a second for 100 buyers: the rooms drain for 9 s, long enough for the
    # runner's ticks to see their queues on a loaded machine (a tick can come late).
    page.fill("#stock", "50")
    page.fill("#buyers", "100")
    page.fill("#room-rate", "10")
    with page.expect_response("**/api/admin/races") as started:
        page.click("#race-button")
    race = started.value.json()
    assert race["room"] == {"rate": 10, "active": 100, "admission_s": 60}, race

    expect(page.locator("#room-card")).to_be_visible()
    expect(page.locator("#status")).to_contain_text(f"race {race['id']}: finished", timeout=120_000)
    for strategy in ("atomic", "gate"):
        lane = page.locator(f'.lane[data-strategy="{strategy}"]')
        expect(lane.locator(".verdict")).to_have_text("held")
        expect(lane.locator('[data-k="orders"]')).to_have_text("50")
        expect(lane.locator('[data-k="room.admitted"]')).to_have_text("100")  # every buyer, in turn
        expect(lane.locator('[data-k="room.waiting"]')).to_have_text("0")
        expect(lane.locator('[data-k="errors"]')).to_have_text("0")
    expect(page.locator("#room-chart canvas")).to_be_visible()
    stack_config.dir("screenshots")
    page.screenshot(path=str(stack_config.run_dir / "screenshots" / "race-room.png"), full_page=True)

    final = page.evaluate("fetch('/api/races/latest').then((r) => r.json())")
    for lane in final["lanes"]:
        waiting = [tick[1] for tick in lane["room"]["series"]]
        assert max(waiting) > 0, lane["room"]  # a queue formed, and drained


@pytest.fixture
def race_ended_after(stack_config):
    """The race a test starts ends with the test: the runner, stopped, stops its
    buyers (the race reads "failed") and is started again, so that the race's load
    does not run on under the tests after it."""
    yield
    Supervisor(stack_config).stop("racer")
    start_again(stack_config, ["racer"])  # and ready for the next race


@pytest.mark.usefixtures("stack_watchers")  # the panels ask Prometheus
def test_the_dashboard_draws_every_panel_from_prometheus_during_a_race(stack_apps, stack_config, page,
                                                                        race_ended_after):
    """/dashboard, opened from the race page while a race runs: each panel drew what
    the apps asked Prometheus for it (the lock waits: the race has setnx and
    zookeeper), the page sent no query of its own, and nothing it asked left the stack."""
    client = stack_apps(strategy="atomic", instances=2, section_delay_ms=5.0)
    origin = stack_config.base_url
    requested = []
    page.on("request", lambda request: requested.append(request.url))
    started = client.race_start(["none", "setnx", "zookeeper", "atomic", "gate"], stock=200, buyers=3000,
                                concurrency=32)
    assert started.status_code == 201, started.text
    page.goto(f"{origin}/race")
    page.click("#dashboard-link")
    expect(page).to_have_title("flashsale · dashboard")
    for key in ("orders", "answers", "lock-wait", "latency", "stock", "backlog"):
        # data-drawn: the points (a graph) or rows (a table) the panel drew last.
        expect(page.locator(f"#panel-{key}")).not_to_have_attribute("data-drawn", "0", timeout=60_000)
    expect(page.locator("#panel-orders canvas")).to_be_visible()
    # The race's own answers, once a scrape and a rule's 10 s window have them.
    expect(page.locator("#panel-answers td", has_text="setnx").first).to_be_visible(timeout=60_000)
    expect(page.locator("#error")).to_have_text("")
    stack_config.dir("screenshots")
    page.screenshot(path=str(stack_config.run_dir / "screenshots" / "dashboard.png"), full_page=True)
    assert requested and all(url.startswith(origin) for url in requested)
    assert any("/dashboard/data/orders?window=" in url for url in requested)
    assert not any("/prometheus/" in url or "query=" in url for url in requested)


def test_the_docs_open_from_the_page_and_their_nav_reaches_a_strategy_and_the_results(
        stack_apps, stack_config, page):
    stack_apps()
    docs(stack_config)  # what `make docs` runs (`make test` has run it too)
    page.goto(f"{stack_config.base_url}/")
    page.click("#docs-link")
    expect(page).to_have_title("flashsale")  # the site's home page
    expect(page.locator("h1#flashsale")).to_be_visible()
    page.get_by_role("link", name="The Redis locks").first.click()
    expect(page.locator("h1").first).to_contain_text("The Redis locks")
    page.get_by_role("link", name="One hot product").first.click()
    expect(page.locator("h1").first).to_contain_text("one hot product")
    stack_config.dir("screenshots")
    page.screenshot(path=str(stack_config.run_dir / "screenshots" / "docs.png"), full_page=False)


def test_a_sale_with_a_waiting_room_admits_the_page_then_it_buys_once(stack_apps, stack_config, page):
    """The page asks the room for its place, shows it, and enables Buy once admitted;
    the purchase spends the admission, and Buy stays off after."""
    client = stack_apps()
    sku = f"browser-room-{uuid.uuid4().hex[:8]}"
    client.reset(sku, 3, strategy="atomic", room_rate=1, room_active=1)
    page.goto(f"{stack_config.base_url}/?sku={sku}")
    signed_in(page, stack_config.buyer_auth)
    # Admitted at the first ask the room had a second's credit for.
    expect(page.locator("#room-state")).to_contain_text("admitted")
    expect(page.locator("#buy-button")).to_be_enabled()
    page.click("#buy-button")
    expect(page.locator("#log li").first).to_contain_text("201 order")
    expect(page.locator("#room-state")).to_have_text("your admission bought")
    expect(page.locator("#buy-button")).to_be_disabled()
    stack_config.dir("screenshots")
    page.screenshot(path=str(stack_config.run_dir / "screenshots" / "page-room.png"), full_page=True)
    assert client.audit(sku)["ordered_quantity"] == 1


def test_a_room_that_asks_for_work_gets_it_from_the_pages_worker_then_a_place(stack_apps, stack_config, page):
    """A sale whose room asks proof of work for a new place: the page fetches the
    room's challenge, solves it in its Web Worker (the progress shown), and asks again
    with the solution; the room gives it a place and admits it."""
    client = stack_apps()
    sku = f"browser-work-{uuid.uuid4().hex[:8]}"
    client.reset(sku, 3, strategy="atomic", room_rate=1, room_active=1, room_challenge_bits=14)
    seen = []
    page.on("request", lambda r: seen.append((r.url, r.headers.get("challenge-solution"))))
    page.goto(f"{stack_config.base_url}/?sku={sku}")
    signed_in(page, stack_config.buyer_auth)
    expect(page.locator("#room-state")).to_contain_text("admitted")
    asks = [solution for url, solution in seen if url.endswith(f"/api/products/{sku}/room")]
    assert any(url.endswith(f"/api/products/{sku}/room/challenge") for url, _ in seen)
    assert asks[0] is None and any(asks)  # refused without; given a place with one


def test_with_sign_up_work_on_both_sign_up_forms_solve_it_in_the_worker_then_sign_in(stack_apps, stack_config,
                                                                                    page):
    """A new buyer costs proof of work (FLASHSALE_SIGN_UP_CHALLENGE_BITS): the sign-up
    page's form and the shop page's "continue as a new buyer" each fetch the challenge,
    solve it in the Web Worker, and post the solution with the form: signed in."""
    stack_apps(sign_up_challenge_bits=12)
    posted = []
    page.on("request", lambda r: r.method == "POST" and posted.append((r.url, r.post_data or "")))
    page.goto(f"{stack_config.base_url}/buyers/sign-up")
    page.fill("#username", f"worker-{uuid.uuid4().hex[:8]}")
    page.fill("#password", "a long enough passphrase")
    page.click("#sign-up")
    page.wait_for_url(f"{stack_config.base_url}/**")
    expect(page.locator("#sign-out")).to_be_visible()
    forms = [parse_qs(data) for url, data in posted if url.endswith("/buyers/sign-up")]
    assert any(url.endswith("/api/buyers/challenge") for url, _ in posted)
    assert len(forms) == 1 and ":" in forms[0]["challenge_solution"][0]  # the work done before the form went
    page.click("#sign-out")
    page.goto(f"{stack_config.base_url}/")
    # What the page says while it works, kept where the next page can read it: 12 bits
    # solve in a blink, before a locator would see the words.
    page.evaluate("""() => {
        const shown = document.getElementById('new-buyer-work');
        new MutationObserver(() => sessionStorage.setItem('work',
            (sessionStorage.getItem('work') || '') + '|' + shown.textContent))
            .observe(shown, {childList: true, characterData: true, subtree: true});
    }""")
    page.click("#new-buyer")
    expect(page.locator("#sign-out")).to_be_visible()
    news = [parse_qs(data) for url, data in posted if url.endswith("/buyers/new")]
    assert len(news) == 1 and ":" in news[0]["challenge_solution"][0]
    shown = page.evaluate("sessionStorage.getItem('work')").split("|")[1:]
    assert shown[:1] == ["proof of work: 0%"] and shown[-1:] == ["proof of work: done"], shown
