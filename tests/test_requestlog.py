"""One request followed through the running stack's logs: nginx names it, answers
with the name (through the app), writes it in its JSON access log, and the app's
JSON log line for it carries the same name; a name a client sends is replaced."""

import json
import time
import uuid

import pytest
import requests

from stack.supervisor import log_file

pytestmark = pytest.mark.e2e


def lines_naming(path, name: str) -> list[dict]:
    found = []
    for line in path.read_text(errors="replace").splitlines():
        if name in line:
            try:
                found.append(json.loads(line))
            except ValueError:
                continue
    return found


def test_an_admin_action_is_named_alike_in_nginx_log_and_the_apps(stack_apps, stack_config):
    stack_apps()
    sku = f"log-{uuid.uuid4().hex[:8]}"
    response = requests.post(f"{stack_config.base_url}/api/admin/products/{sku}/reset", json={"stock": 3},
                             headers={"Authorization": f"Token {stack_config.admin_token()}",
                                      "X-Request-ID": "chosen-by-the-client"}, timeout=30)
    assert response.status_code == 200
    name = response.headers["X-Request-ID"]
    assert len(name) == 32 and int(name, 16) >= 0  # nginx's $request_id, not the client's

    deadline = time.monotonic() + 10  # nginx flushes its log buffer every second
    while True:
        app = [line for app_name in stack_config.app_names
               for line in lines_naming(log_file(stack_config, app_name), name)]
        access = lines_naming(log_file(stack_config, "nginx"), name)
        if (app and access) or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    [logged] = app
    assert (logged["action"], logged["request_id"]) == ("reset", name)
    assert logged["details"] == {"sku": sku, "stock": "3"}
    [entry] = access
    assert (entry["method"], entry["status"]) == ("POST", 200)
    assert entry["uri"] == f"/api/admin/products/{sku}/reset"
    assert entry["upstream"].startswith("127.0.0.1:") and float(entry["request_s"]) >= 0


@pytest.mark.parametrize("strategy", ["atomic", "setnx", "gate"])
def test_a_purchase_is_followed_from_nginx_line_to_its_row(stack_apps, stack_config, strategy):
    """The name nginx gives a purchase is on its order's row, under each seller and
    path (atomic's stored procedure, the ORM's under a lock, the gate's persister),
    and under the gate in the persister's line for the order."""
    import MySQLdb

    client = stack_apps()
    sku = f"log-{strategy}-{uuid.uuid4().hex[:6]}"
    client.reset(sku, stock=3, strategy=strategy)
    answer = client.order(sku, 1, "u1")
    assert answer.status_code == 201, answer.text
    name, order_id = answer.headers["X-Request-ID"], answer.json()["order_id"]
    if strategy == "gate":
        assert client.audit(sku, settle=30)["gate"]["persisted"] == 1
    db = MySQLdb.connect(unix_socket=str(stack_config.run_dir / "mariadb" / "mysqld.sock"), user="root",
                         database="flashsale")
    try:
        cursor = db.cursor()
        cursor.execute("SELECT id FROM orders_order WHERE request_id = %s", [name])
        assert cursor.fetchall() == ((order_id,),)
    finally:
        db.close()
    if strategy == "gate":
        deadline = time.monotonic() + 10
        while not (written := [line for persister in stack_config.persister_names
                               for line in lines_naming(log_file(stack_config, persister), name)]):
            assert time.monotonic() < deadline, "no persister line names the request"
            time.sleep(0.2)
        [line] = written
        assert line["request_id"] == name and f"wrote order {order_id} of {sku}" in line["message"]
