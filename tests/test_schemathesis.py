"""The API keeps its OpenAPI schema: schemathesis runs every operation through the
stack's nginx, all its checks, its phases (examples, coverage, fuzzing, and the
stateful one that follows the schema's links from a purchase to its order), the admin
operation with the token, and finds nothing.

The seed is schemathesis' own, new every run; a failure prints it with a ``curl`` line
for each case, so a failure found once can be replayed with ``--seed``."""

import os
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
import redis

from races.services import QUEUE
from stack.control import start_again
from stack.supervisor import Supervisor

ROOT = Path(__file__).resolve().parent.parent
SKU = "schemathesis-1"
# Random cases an operation in the fuzzing and stateful phases (the coverage phase's
# boundary cases come on top): a new seed every run, so runs add up. `make fuzz` asks
# for many more.
EXAMPLES = int(os.environ.get("FLASHSALE_FUZZ_EXAMPLES", "50"))
# A run's bound: a hang's, not the machine's speed (the suite's 300 s would cut a slow
# machine's run short), longer for more cases.
RUN_TIMEOUT_S = 600 * max(1, EXAMPLES // 50)
# schemathesis' response-time check (one of --checks all) defaults to 10 s, a bound on
# the machine's speed; an answer's bound is nginx's, the longest it waits for an app.
MAX_RESPONSE_S = max(int(s) for s in re.findall(
    r"proxy_read_timeout (\d+)s;", (ROOT / "nginx" / "nginx.conf.template").read_text()))
STOCK = 1_000_000
WINDOW_S = 3600  # the hooks' product: its orders wait for a payment

# Minutes each, restarting nothing: make test runs them on the exclusive tests' stack.
pytestmark = [pytest.mark.e2e, pytest.mark.own_stack, pytest.mark.timeout(2 * RUN_TIMEOUT_S + 60)]


@pytest.fixture
def racer_stopped(stack_config):
    """The race runner stopped while schemathesis runs: the races it starts (each up to
    20,000 buyers a strategy) stay queued instead of loading the machine under the
    tests after it, and leave the queue with it."""
    supervisor = Supervisor(stack_config)
    supervisor.stop("racer")
    try:
        yield
    finally:
        with redis.Redis(port=stack_config.redis_port) as stack_redis:
            stack_redis.delete(QUEUE)
        start_again(stack_config, ["racer"])  # and ready, before the next test asks for a race


# Each operation gets the credentials its security names (the admin's token, a buyer's
# bearer token), from the environment. A new buyer's password on the common-passwords
# list is refused (400) though the schema allows it: no schema can carry the list.
# Nor can one carry the HMAC that signs a provider's webhook: what schemathesis sends
# the webhook is refused (400) unless the provider signed it; nor which payment methods
# the provider takes: another is declined (402). A username asked for again and again
# with wrong passwords is locked out (429).
CONFIG = """
[auth.openapi.adminToken]
api_key = "Token ${FLASHSALE_SCHEMATHESIS_ADMIN_TOKEN}"

[auth.openapi.buyerToken]
bearer = "${FLASHSALE_SCHEMATHESIS_BEARER}"

[[operations]]
include-name = "POST /api/buyers"
checks.positive_data_acceptance.expected-statuses = ["2xx", "3xx", "400", "401", "403", "404", "409",
                                                     "429", "5xx"]

[[operations]]
include-name = "POST /api/buyers/token"
checks.positive_data_acceptance.expected-statuses = ["2xx", "400", "401", "429", "5xx"]

[[operations]]
include-name = "POST /api/orders/{order_id}/pay"
checks.positive_data_acceptance.expected-statuses = ["2xx", "3xx", "401", "402", "403", "404", "409",
                                                     "429", "5xx"]

[[operations]]
include-name = "POST /api/payments/webhook"
checks.positive_data_acceptance.expected-statuses = ["2xx", "400", "5xx"]
"""


def schemathesis(client, directory: Path, *arguments: str, env: dict[str, str]) -> subprocess.Popen:
    """A run in the background, its output to files in ``directory`` (a pipe left
    unread would stall it)."""
    directory.mkdir()
    (directory / "schemathesis.toml").write_text(CONFIG)
    _, signed = client.as_buyer("schemathesis")
    credentials = {"FLASHSALE_SCHEMATHESIS_ADMIN_TOKEN": client.admin_token,
                   "FLASHSALE_SCHEMATHESIS_BEARER": signed.get("Authorization", "").removeprefix("Bearer ")}
    return subprocess.Popen(
        [str(Path(sys.executable).with_name("schemathesis")), "run", f"{client.base_url}/api/schema",
         "--checks", "all", "--max-response-time", str(MAX_RESPONSE_S), "--max-examples", str(EXAMPLES),
         *arguments],
        cwd=directory, env={**os.environ, "NO_COLOR": "1", **credentials, **env},
        stdout=(directory / "stdout").open("w"), stderr=(directory / "stderr").open("w"))


def finished(run: subprocess.Popen, directory: Path) -> tuple[int, str, str]:
    """The run's exit status and output once it ends; killed if it has not ended
    when the test does."""
    try:
        run.wait(timeout=RUN_TIMEOUT_S)
        return run.returncode, (directory / "stdout").read_text(), (directory / "stderr").read_text()
    finally:
        if run.poll() is None:
            run.kill()
            run.wait()


# Two tests, never at once on one stack: both runs make up the same short skus ("0"),
# and one run's reset of a product under another strategy while the other buys it
# answers that purchase 503 (busy, as documented). Giving the hooked run products of
# its own meant rewriting its path parameters in a hook, which schemathesis then took
# for schema-violating requests (ST201) in its stateful phase. (make test runs them one
# after the other, on the exclusive tests' stack.)

def test_schemathesis_with_the_hooks_finds_nothing_and_reaches_the_sale(stack_apps, tmp_path, racer_stopped):
    """The hooks send some requests to a real product and order."""
    client = stack_apps()
    client.reset(SKU, STOCK, payment_window_s=WINDOW_S)
    first = client.order(SKU, 1, "schemathesis")
    assert first.status_code == 201, first.text
    # Races are the plain run's alone: a race resets one product a strategy, shared
    # by name (race-<strategy>), and one run's race reset under the other's purchase of
    # that product answers it 503 (cold while reset, as designed). So the hooked run
    # neither starts races nor reads them (a race's lanes name its products).
    hooked = schemathesis(client, tmp_path / "hooked", "--url", client.base_url,
                          "--exclude-path-regex", "^/api/(admin/)?races",
                          "--report", "junit", "--report-dir", str(tmp_path / "hooked"), env={
                              "PYTHONPATH": str(ROOT),
                              "SCHEMATHESIS_HOOKS": "tests.schemathesis_hooks",
                              "FLASHSALE_SCHEMATHESIS_SKU": SKU,
                              "FLASHSALE_SCHEMATHESIS_URL": client.base_url,
                              "FLASHSALE_SCHEMATHESIS_STOCK": str(STOCK),
                              "FLASHSALE_SCHEMATHESIS_WINDOW_S": str(WINDOW_S),
                              "FLASHSALE_SCHEMATHESIS_ORDER_ID": str(first.json()["order_id"]),
                              "FLASHSALE_SCHEMATHESIS_ANSWERS": str(tmp_path / "answers.tsv")})
    returncode, stdout, stderr = finished(hooked, tmp_path / "hooked")
    # The token is the stack's; schemathesis filters it out of what it prints.
    assert returncode == 0, stdout[-20_000:] + stderr[-5_000:]
    assert " passed" in stdout and "Missing test data" not in stdout, stdout[-5_000:]
    # The hooks sent requests to the real product and order, so the run reached the
    # sale itself (an order taken) and the lookups' rows, not only their 404s.
    answers = Counter(tuple(line.split("\t")) for line in (tmp_path / "answers.tsv").read_text().splitlines())
    assert {("POST /api/orders", "201"), ("GET /api/orders/{order_id}", "200"),
            ("GET /api/products/{sku}", "200"), ("GET /api/products/{sku}/audit", "200"),
            ("GET /api/products/{sku}/audit/summary", "200"),
            ("POST /api/admin/products/{sku}/reset", "200")} <= answers.keys(), sorted(answers.items())


def test_schemathesis_as_a_user_runs_it_finds_nothing(stack_apps, tmp_path, racer_stopped):
    """Every operation from the schema alone, where lookups of ids it cannot know are
    404s (its warning), never failures."""
    client = stack_apps()
    plain = schemathesis(client, tmp_path / "plain", env={})
    returncode, stdout, stderr = finished(plain, tmp_path / "plain")
    assert returncode == 0, stdout[-20_000:] + stderr[-5_000:]
    summary = stdout.split("SUMMARY")[-1]
    assert " passed" in stdout and "failed" not in summary, stdout[-5_000:]
