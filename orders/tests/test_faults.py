"""A purchase meets a fault: every answer stays true, nothing is lost.

Faults are real and injected at a chosen moment: Redis loses its data (FLUSHDB, as a
restart without persistence does), a database connection is killed by the server
(``KILL``, as a restart does to every connection), Redis refuses one write.
"""

import threading
import time

import pytest
import redis
from django.core.cache import cache, caches
from django.db import OperationalError, connection, connections
from django.test import override_settings
from prometheus_client import REGISTRY
from rest_framework.test import APIClient

from common.errors import Busy, NotFound, OutcomeUnknown, SoldOut, Unavailable
from common.testing import start_thread
from inventory.faults import stalled
from inventory.models import Product, Stock, StockFlow
from locking.backends.mysql import ForUpdateLock, InsertLock, side_connection
from orders import idempotency
from orders.models import Order
from orders.purchase import order_create
from orders.reset import sale_reset
from orders.salestate import sale_state_get, sale_state_sold_out
from orders.selectors import sale_audit


def buy(key: str, user: str = "u1", sku: str = "sku-1"):
    return order_create(sku=sku, quantity=1, user_id=user, idempotency_key=key)


def kill_this_connection() -> None:
    """The server ends this thread's database connection, as a restart would."""
    thread_id = connection.connection.thread_id()
    with side_connection("default") as cursor:
        cursor.execute("KILL %s", [thread_id])


@pytest.fixture
def sold_out_sale(db):
    """A sale of 2 units, sold to k1 and k2; its mark says sold out."""
    sale_reset(sku="sku-1", stock=2)
    bought = {key: buy(key, user=key).order_id for key in ("k1", "k2")}
    assert sale_state_get(sku="sku-1").sold_out
    return bought


@pytest.mark.django_db
def test_after_redis_lost_its_data_a_replay_answers_its_order_not_sold_out(sold_out_sale):
    cache.clear()  # what a restart of a Redis without persistence leaves
    for key, order_id in sold_out_sale.items():
        again = buy(key, user=key)
        assert again.replayed and again.order_id == order_id
    with pytest.raises(SoldOut):  # a key that never bought is still refused
        buy("k3", user="k3")
    assert Order.objects.count() == 2


@pytest.mark.django_db
def test_a_sold_out_mark_written_after_redis_lost_its_data_does_not_vouch_for_the_flags(db):
    sale_reset(sku="sku-1", stock=1)
    before = sale_state_get(sku="sku-1")
    assert before.flags_complete
    cache.clear()  # lost, while a purchase that read the mark before is still on its way
    # ...and it sells the last unit
    sale_state_sold_out(sku="sku-1", strategy="atomic", sale=before.opening.sale, returns=0)
    mark = sale_state_get(sku="sku-1")
    assert mark.sold_out and not mark.flags_complete


@pytest.mark.django_db
def test_a_flag_past_its_ttl_is_looked_up_in_the_database(sold_out_sale):
    cache.delete("idem:k1")  # the flag expired; the sale is as old as the flag's TTL
    with override_settings(FLASHSALE_IDEMPOTENCY_TTL_S=0):
        again = buy("k1", user="k1")
    assert again.replayed and again.order_id == sold_out_sale["k1"]


@pytest.mark.django_db
def test_while_the_mark_vouches_for_the_flags_a_refusal_asks_no_database(sold_out_sale,
                                                                         django_assert_num_queries):
    assert sale_state_get(sku="sku-1").flags_complete
    with django_assert_num_queries(0), pytest.raises(SoldOut):
        buy("k3", user="k3")


def idempotency_events(event: str) -> float:
    return REGISTRY.get_sample_value("flashsale_idempotency_events_total", {"event": event}) or 0.0


@pytest.mark.django_db
def test_a_flag_redis_refused_is_owed_until_it_answers(db, monkeypatch):
    sale_reset(sku="sku-1", stock=5)
    owed, written = idempotency_events("flag_owed"), idempotency_events("owed_flags_written")

    def refused(*args, **kwargs):
        raise redis.ConnectionError("Redis is restarting")

    monkeypatch.setattr(caches["default"], "set", refused)  # the write after the commit fails
    first = buy("k1")
    monkeypatch.undo()
    # Until the flag is written, this process does not let the mark vouch for the flags...
    assert idempotency.flags_unwritten() and not sale_state_get(sku="sku-1").flags_complete
    assert cache.get("idem:k1")["order_id"] is None  # only the claim is there
    buy("k2", user="k2")  # ...and its next claim writes it
    assert not idempotency.flags_unwritten() and sale_state_get(sku="sku-1").flags_complete
    assert cache.get("idem:k1")["order_id"] == first.order_id
    assert idempotency_events("flag_owed") - owed == 1
    assert idempotency_events("owed_flags_written") - written == 1


@pytest.mark.django_db(transaction=True)
def test_a_database_connection_killed_mid_purchase_is_503_unavailable_and_writes_nothing(product_factory):
    product_factory(sku="sku-1", stock=5)
    connection.ensure_connection()
    kill_this_connection()
    response = APIClient().post("/api/orders", {"sku": "sku-1", "quantity": 1, "user_id": "u1"},
                                format="json", HTTP_IDEMPOTENCY_KEY="k1")
    assert response.status_code == 503, response.content
    body = response.json()
    assert (body["error"], body["backend"]) == ("unavailable", "database") and body["message"]
    assert response.headers["Retry-After"] == "1"
    # The next request reconnects by itself, and the key was given back.
    assert not buy("k1").replayed
    assert Order.objects.count() == 1 and Stock.objects.get().quantity == 4


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("strategy", ["redisson", "mysql", "mysql-for-update"])
@pytest.mark.parametrize("landed", [False, True], ids=["lost-before-commit", "lost-after-commit"])
def test_a_connection_that_dies_during_commit_says_the_outcome_is_unknown_and_a_retry_learns_it(
        product_factory, monkeypatch, strategy, landed):
    product_factory(sku="sku-1", stock=5)
    wrapper = connections["default"]  # this thread's, not the proxy: monkeypatch restores it
    wrapper.ensure_connection()
    real_commit = wrapper._commit

    def commit_and_lose_the_connection():
        monkeypatch.setattr(wrapper, "_commit", real_commit)
        if landed:
            real_commit()  # the COMMIT landed; its reply is lost with the connection
        kill_this_connection()
        if landed:
            raise OperationalError(2013, "Lost connection to server during query")
        real_commit()

    monkeypatch.setattr(wrapper, "_commit", commit_and_lose_the_connection)
    with override_settings(FLASHSALE_STRATEGY=strategy), pytest.raises(OutcomeUnknown) as caught:
        buy("k1")
    assert caught.value.status_code == 503 and caught.value.headers["Retry-After"] == "1"
    assert Order.objects.count() == (1 if landed else 0)
    with override_settings(FLASHSALE_STRATEGY=strategy):
        retry = buy("k1")
    assert retry.replayed is landed  # the order it had, or the purchase made now
    if landed:
        assert retry.order_id == caught.value.order_id
    assert Order.objects.count() == 1 and Stock.objects.get().quantity == 4
    assert sale_audit(sku="sku-1").consistent


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("landed", [False, True], ids=["lost-before-it-ran", "lost-after-it-committed"])
def test_a_connection_that_dies_during_the_one_trip_call_says_the_outcome_is_unknown_and_a_retry_learns_it(
        product_factory, landed):
    # atomic's transaction is one CALL, its COMMIT inside: a connection lost under it
    # leaves the outcome unknown, whether the server had run it or not.
    product_factory(sku="sku-1", stock=5)

    def lose_the_connection(execute, sql, params, many, context):
        if not sql.startswith("CALL "):
            return execute(sql, params, many, context)
        if landed:
            execute(sql, params, many, context)  # it committed; its reply is lost with the connection
            kill_this_connection()
            raise OperationalError(2013, "Lost connection to server during query")
        kill_this_connection()
        return execute(sql, params, many, context)

    with connection.execute_wrapper(lose_the_connection), pytest.raises(OutcomeUnknown) as caught:
        buy("k1")
    assert caught.value.status_code == 503 and caught.value.order_id is None
    assert Order.objects.count() == (1 if landed else 0)
    retry = buy("k1")  # at once: the flag sends it to the database, not to wait
    assert retry.replayed is landed  # the order it had, or the purchase made now
    assert Order.objects.count() == 1 and Stock.objects.get().quantity == 4
    assert sale_audit(sku="sku-1").consistent


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("strategy", ["atomic", "mysql"])
def test_a_purchase_paused_past_its_deadline_commits_nothing(product_factory, strategy):
    product_factory(sku="sku-1", stock=5)

    def paused(point):
        if point == "start":  # the stock is not yet touched
            time.sleep(0.3)

    with override_settings(FLASHSALE_STRATEGY=strategy, FLASHSALE_PURCHASE_DEADLINE_S=0.2), \
            stalled(paused), pytest.raises(Busy, match="deadline"):
        buy("k1")
    assert not Order.objects.exists() and Stock.objects.get().quantity == 5
    # Its claim is left to go stale (past the deadline it may no longer be its own);
    # once stale, the retry asks the database and takes the key over.
    assert cache.get("idem:k1")["order_id"] is None
    with override_settings(FLASHSALE_IDEMPOTENCY_PENDING_TTL_S=0):
        assert not buy("k1").replayed


@pytest.mark.django_db(transaction=True)
def test_a_request_past_its_deadline_does_not_drop_the_flag_of_the_retry_that_took_its_key_over(
        product_factory):
    product_factory(sku="sku-1", stock=5)

    def a_retry_takes_over_meanwhile(point):
        if point == "start":
            time.sleep(0.3)
            took_over = {"fingerprint": "the retry's", "order_id": 4242, "since": None}
            cache.set("idem:k1", took_over, timeout=None)

    with override_settings(FLASHSALE_PURCHASE_DEADLINE_S=0.2), stalled(a_retry_takes_over_meanwhile), \
            pytest.raises(Busy, match="deadline"):
        buy("k1")
    assert cache.get("idem:k1")["order_id"] == 4242


@pytest.mark.django_db
@pytest.mark.parametrize(("header", "status"), [
    (lambda now: f"t={now - 10:.3f}", 503),  # waited in a frozen instance's queue past the deadline
    (lambda now: f"t={now - 1:.3f}", 201),
    (lambda now: f"t={now + 3600:.3f}", 201),  # a clock ahead counts as now
    (lambda now: "t=soon", 201), (lambda now: "t=nan", 201),  # not nginx's: ignored
])
def test_the_deadline_counts_from_when_nginx_received_the_request(product_factory, header, status):
    product_factory(sku="sku-1", stock=5)
    response = APIClient().post("/api/orders", {"sku": "sku-1", "quantity": 1, "user_id": "u1"},
                                format="json", HTTP_IDEMPOTENCY_KEY="k1",
                                HTTP_X_REQUEST_START=header(time.time()))
    assert response.status_code == status, response.content
    assert Order.objects.count() == (status == 201)
    if status == 503:
        assert response.json()["error"] == "busy" and "deadline" in response.json()["message"]


@pytest.mark.django_db(transaction=True)
# Not atomic: its whole transaction is one CALL, and a connection lost under it
# leaves the outcome unknown (the test above).
@pytest.mark.parametrize("strategy", ["redisson", "mysql", "mysql-for-update"])
def test_a_connection_killed_while_the_lock_is_held_is_503_unavailable_and_writes_nothing(
        product_factory, strategy):
    product_factory(sku="sku-1", stock=5)

    def the_database_restarts(point):
        if point == "start":  # the lock is held, the order row written, the stock not yet
            kill_this_connection()

    with override_settings(FLASHSALE_STRATEGY=strategy):
        with stalled(the_database_restarts), pytest.raises(Unavailable):
            buy("k1")
        assert not Order.objects.exists() and Stock.objects.get().quantity == 5
        assert not buy("k1").replayed  # reconnected; the key was given back
    assert sale_audit(sku="sku-1").consistent


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("strategy", ["mysql", "mysql-for-update"])
@pytest.mark.parametrize("step", ["give_back", "_commit"])
def test_a_database_that_goes_down_as_the_mysql_lock_releases_never_answers_201(
        product_factory, monkeypatch, strategy, step):
    product_factory(sku="sku-1", stock=5)
    wrapper = connections["default"]
    wrapper.ensure_connection()
    lock_class = InsertLock if strategy == "mysql" else ForUpdateLock
    owner = lock_class if step == "give_back" else wrapper
    real = getattr(owner, step)

    def the_database_goes_down(*args):
        kill_this_connection()
        monkeypatch.setitem(wrapper.settings_dict, "PORT", 1)  # and stays down: reconnecting fails
        return real(*args)

    monkeypatch.setattr(owner, step, the_database_goes_down)
    with override_settings(FLASHSALE_STRATEGY=strategy), pytest.raises((Busy, OutcomeUnknown, Unavailable)):
        buy("k1")
    monkeypatch.undo()  # back up
    wrapper.close()
    assert not Order.objects.exists() and Stock.objects.get().quantity == 5
    with override_settings(FLASHSALE_STRATEGY=strategy):
        assert not buy("k1").replayed


def _claim_as_a_dead_instance(key: str, user: str, seconds_ago: float) -> None:
    from orders.idempotency import request_fingerprint as _fingerprint

    fingerprint = _fingerprint(sku="sku-1", quantity=1, user_id=user)
    cache.set(f"idem:{key}", {"fingerprint": fingerprint, "order_id": None,
                              "since": time.time() - seconds_ago}, timeout=None)


@pytest.mark.django_db
def test_an_instance_that_died_between_its_commit_and_its_flag_leaves_a_key_that_replays(db):
    sale_reset(sku="sku-1", stock=1)
    first = buy("k1")  # committed; then its instance died before it could write the flag:
    _claim_as_a_dead_instance("k1", "u1", seconds_ago=60)  # only its claim is left, long stale
    assert sale_state_get(sku="sku-1").sold_out and sale_state_get(sku="sku-1").flags_complete
    again = buy("k1")  # the sale sold out, and the mark vouches for the flags: still the order
    assert again.replayed and again.order_id == first.order_id


@pytest.mark.django_db
def test_a_stale_claim_without_an_order_is_taken_over(db):
    sale_reset(sku="sku-1", stock=5)
    _claim_as_a_dead_instance("k1", "u1", seconds_ago=60)  # died before it wrote anything
    taken_over = idempotency_events("stale_claim_taken_over")
    assert not buy("k1").replayed
    assert idempotency_events("stale_claim_taken_over") - taken_over == 1
    assert Order.objects.filter(idempotency_key="k1").count() == 1
    assert cache.get("idem:k1")["order_id"] is not None


@pytest.mark.django_db
@override_settings(FLASHSALE_INFLIGHT_WAIT_S=0.2)
def test_a_fresh_claim_of_another_request_is_still_waited_for(db):
    sale_reset(sku="sku-1", stock=5)
    _claim_as_a_dead_instance("k1", "u1", seconds_ago=1)  # still within its deadline
    with pytest.raises(Busy, match="in progress"):
        buy("k1")
    assert not Order.objects.exists()


@pytest.mark.django_db
@override_settings(FLASHSALE_INFLIGHT_WAIT_S=0.2)
def test_a_flag_that_keeps_outliving_its_order_is_waited_for_a_bounded_time(db, monkeypatch):
    """A completed flag whose order is gone is dropped and the key claimed again; one
    that keeps coming back (here: dropping it does nothing) costs the bounded wait,
    then 503, never a loop without end."""
    sale_reset(sku="sku-1", stock=5)
    fingerprint = idempotency.request_fingerprint(sku="sku-1", quantity=1, user_id="u1")
    cache.set("idem:k1", {"fingerprint": fingerprint, "order_id": 999_999}, timeout=None)
    monkeypatch.setattr("orders.idempotency.flags_forget", lambda keys: None)
    buyer, outcome = start_thread(lambda: buy("k1"), daemon=True)
    buyer.join(5)
    assert isinstance(outcome.get("error"), Busy)
    assert not Order.objects.exists()


def _in_a_statement(cursor, like: str, timeout: float = 10.0) -> None:
    """Until another connection of the app's user (visible without the PROCESS
    privilege) to this test database is inside a statement like ``like``: blocked, in
    this test, not the lane's other pytest, on its own database of the same server."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        cursor.execute("SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE ID <> CONNECTION_ID() "
                       "AND DB = DATABASE() AND INFO LIKE %s", [like])
        if cursor.fetchone()[0]:
            return
        time.sleep(0.01)
    raise AssertionError(f"no statement like {like!r} ran")


@pytest.mark.django_db(transaction=True)
def test_a_reset_that_waits_too_long_for_a_row_is_503_busy_and_changes_nothing(product_factory, admin_api):
    product = product_factory(sku="sku-1", stock=10, name="Phone")
    with connection.cursor() as cursor:
        cursor.execute("SET SESSION innodb_lock_wait_timeout = 1")
    with side_connection("default") as side:
        side.execute("BEGIN")
        side.execute("SELECT id FROM inventory_product WHERE id = %s FOR UPDATE", [product.pk])
        response = admin_api.post("/api/admin/products/sku-1/reset", {"stock": 99, "name": "Other"},
                                  format="json")
        side.execute("ROLLBACK")
    assert response.status_code == 503
    assert response.json()["error"] == "busy"
    assert response["Retry-After"] == "1"
    product.refresh_from_db()
    assert product.name == "Phone"
    assert [s.quantity for s in Stock.objects.filter(product=product)] == [10]


@pytest.mark.django_db(transaction=True)
def test_a_reset_chosen_as_a_deadlocks_victim_is_done_again(product_factory, admin_api, caplog):
    """A real deadlock: the reset holds the product's row and waits for its stock
    rows, which a side transaction holds; the side one then asks for the product's
    row. InnoDB rolls back the lighter of the two: the reset (the side one wrote 200
    ledger rows of another product). The reset does it all again once the side one
    ends."""
    other = product_factory(sku="sku-0", stock=10)  # first: its ledger rows sort before sku-1's
    product = product_factory(sku="sku-1", stock=10, name="Phone")
    rows = [(other.pk, 0, 1, f"side-{n}", "", 1, 0, "side") for n in range(200)]
    started, done = threading.Event(), threading.Event()

    def side_transaction():
        with side_connection("default") as side, side_connection("default") as watcher:
            side.execute("BEGIN")
            side.executemany(
                "INSERT INTO inventory_stockflow (product_id, segment, quantity, operation_flag, "
                "order_reference, quantity_before, quantity_after, instance, created_at) "
                "VALUES (%s, %s, %s, %s, %s, %s, %s, %s, NOW(6))", rows)
            side.execute("SELECT id FROM inventory_stock WHERE product_id = %s FOR UPDATE", [product.pk])
            started.set()
            # The reset, holding the product's row, waits for its stock rows.
            _in_a_statement(watcher, "DELETE FROM `inventory_stock` %")
            side.execute("UPDATE inventory_product SET name = 'side' WHERE id = %s", [product.pk])
            time.sleep(0.2)  # the victim's second try waits for this one to end
            side.execute("ROLLBACK")
        done.set()

    thread = threading.Thread(target=side_transaction)
    thread.start()
    assert started.wait(10)
    with caplog.at_level("INFO", logger="orders.reset"):
        response = admin_api.post("/api/admin/products/sku-1/reset", {"stock": 7, "name": "Again"},
                                  format="json")
    thread.join(10)
    assert done.is_set()
    assert response.status_code == 200, response.content
    assert "deadlock's victim (try 1)" in caplog.text
    product.refresh_from_db()
    assert product.name == "Again"
    assert [s.quantity for s in Stock.objects.filter(product=product)] == [7]
    assert not StockFlow.objects.filter(product__in=[product, other]).exists()


def _innodb_deadlocks(cursor) -> int:
    cursor.execute("SHOW GLOBAL STATUS LIKE 'Innodb_deadlocks'")
    return int(cursor.fetchone()[1])


@pytest.mark.exclusive  # alone: InnoDB's deadlock count is the whole server's
@pytest.mark.django_db(transaction=True)
def test_a_reset_of_a_new_product_does_not_deadlock_with_the_newest_products_buyer(product_factory,
                                                                                  admin_api):
    """The newest product's purchase locks its stock rows up to the end of the stock's
    product index, and then appends its ledger row at the end of the ledger's. A
    reset of a product not there yet has no rows to delete: it must take no lock at
    those ends, or it waits on the first while holding the second (the schemathesis
    run's 503 busy, three deadlocks in a row). Here it waits for the purchase to
    commit, and nobody is rolled back."""
    newest = product_factory(sku="sku-1", stock=10)
    started, done = threading.Event(), threading.Event()
    outcome = {}

    def newest_purchase():
        with side_connection("default") as side, side_connection("default") as watcher:
            side.execute("BEGIN")
            side.execute("UPDATE inventory_stock SET quantity = quantity - 1 WHERE product_id = %s",
                         [newest.pk])
            started.set()
            # The reset writes the new product's stock row, at the index's end.
            _in_a_statement(watcher, "INSERT INTO `inventory_stock` %")
            try:
                side.execute(
                    "INSERT INTO inventory_stockflow (product_id, segment, quantity, operation_flag, "
                    "order_reference, quantity_before, quantity_after, instance, created_at) "
                    "VALUES (%s, 0, 1, 'k1', '1', 10, 9, 'side', NOW(6))", [newest.pk])
                side.execute("COMMIT")
                outcome["committed"] = True
            except OperationalError as e:
                outcome["error"] = e
                side.execute("ROLLBACK")
        done.set()

    with connection.cursor() as cursor:
        deadlocks = _innodb_deadlocks(cursor)
    thread = threading.Thread(target=newest_purchase)
    thread.start()
    assert started.wait(10)
    response = admin_api.post("/api/admin/products/sku-2/reset", {"stock": 7}, format="json")
    thread.join(10)
    assert done.is_set()
    assert response.status_code == 200, response.content
    assert outcome == {"committed": True}
    with connection.cursor() as cursor:
        assert _innodb_deadlocks(cursor) == deadlocks
    assert StockFlow.objects.filter(product=newest).count() == 1
    assert [s.quantity for s in Stock.objects.filter(product__sku="sku-2")] == [7]


@pytest.mark.django_db(transaction=True)
def test_a_reset_beaten_to_a_new_products_row_is_done_again_as_a_reset_of_it(product_factory, monkeypatch,
                                                                              caplog):
    """Two resets of one new product: both find no product, and the second's create
    meets the first's row. It is done again, now as a reset of that product: what
    was sold in between is cleared too."""
    product = product_factory(sku="sku-1", stock=10)  # the first reset's, made after the second looked
    order_create(sku="sku-1", quantity=2, user_id="u1", idempotency_key="k1")
    looks = []

    def looked_before_it_was_there(*, sku):
        looks.append(sku)
        if len(looks) == 1:
            raise NotFound(f"no product with sku {sku!r}")
        return Product.objects.get(sku=sku)

    monkeypatch.setattr("orders.reset.product_get", looked_before_it_was_there)
    with caplog.at_level("INFO", logger="orders.reset"):
        sale_reset(sku="sku-1", stock=3)
    assert looks == ["sku-1", "sku-1"]
    assert "beaten to the new product's row (try 1)" in caplog.text
    assert not Order.objects.exists() and not StockFlow.objects.exists()
    assert [s.quantity for s in Stock.objects.filter(product=product)] == [3]
