"""The API keeps its OpenAPI schema: schemathesis runs every operation through the
stack's nginx, all its checks, its phases (examples, coverage, fuzzing, and the
stateful one that follows the schema's links from a purchase to its order), the admin
operation with the token, and finds nothing.

The seed is schemathesis' own, new every run; a failure prints it with a ``curl`` line
for each case, so a failure found once can be replayed with ``--seed``."""

import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

# Each run is bounded by its subprocess's own 600 s; the suite's 300 s default would
# cut a slow machine's run short first.
pytestmark = [pytest.mark.e2e, pytest.mark.timeout(660)]

ROOT = Path(__file__).resolve().parent.parent
SKU = "schemathesis-1"


def test_schemathesis_finds_nothing(stack_apps, tmp_path):
    client = stack_apps()
    client.reset(SKU, 1_000_000)
    first = client.order(SKU, 1, "schemathesis")
    assert first.status_code == 201, first.text
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "SCHEMATHESIS_HOOKS": "tests.schemathesis_hooks",
        "FLASHSALE_SCHEMATHESIS_SKU": SKU,
        "FLASHSALE_SCHEMATHESIS_ORDER_ID": str(first.json()["order_id"]),
        "FLASHSALE_SCHEMATHESIS_ANSWERS": str(tmp_path / "answers.tsv"),
        "NO_COLOR": "1",
    }
    command = [
        str(Path(sys.executable).with_name("schemathesis")), "run", f"{client.base_url}/api/schema",
        "--url", client.base_url,
        "--checks", "all",
        "--max-examples", "100",
        "--header", f"Authorization: Token {client.admin_token}",
        "--report", "junit", "--report-dir", str(tmp_path),
    ]
    run = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    # The token is the stack's; schemathesis filters it out of what it prints.
    assert run.returncode == 0, run.stdout[-20_000:] + run.stderr[-5_000:]
    assert " passed" in run.stdout and "Missing test data" not in run.stdout, run.stdout[-5_000:]
    # The hooks sent requests to the real product and order, so the run reached the
    # sale itself (an order taken) and the lookups' rows, not only their 404s.
    answers = Counter(tuple(line.split("\t")) for line in (tmp_path / "answers.tsv").read_text().splitlines())
    assert {("POST /api/orders", "201"), ("GET /api/orders/{order_id}", "200"),
            ("GET /api/products/{sku}", "200"), ("GET /api/products/{sku}/audit", "200"),
            ("GET /api/products/{sku}/audit/summary", "200"),
            ("POST /api/admin/products/{sku}/reset", "200")} <= answers.keys(), sorted(answers.items())


def test_schemathesis_without_the_hooks_finds_nothing_either(stack_apps, tmp_path):
    """As a user would run it: the schema alone, no hooks naming a real product or
    order. Lookups of ids it cannot know are 404s (its warning), never failures."""
    client = stack_apps()
    command = [
        str(Path(sys.executable).with_name("schemathesis")), "run", f"{client.base_url}/api/schema",
        "--checks", "all",
        "--max-examples", "100",
        "--header", f"Authorization: Token {client.admin_token}",
    ]
    run = subprocess.run(command, cwd=tmp_path, env={**os.environ, "NO_COLOR": "1"}, capture_output=True,
                         text=True, timeout=600)
    assert run.returncode == 0, run.stdout[-20_000:] + run.stderr[-5_000:]
    assert " passed" in run.stdout and "failed" not in run.stdout.split("SUMMARY")[-1], run.stdout[-5_000:]
