"""The pages' proof-of-work solver (orders/static/orders/pow-worker.js) in a real
browser (Debian's chromium, driven by Playwright), without the stack: its SHA-256
against Python's over messages of every padding case, and its solution the one the
server's checker and the load tools' solver find."""

from __future__ import annotations

import hashlib
import json

import pytest

from benchmarks.race_watch import chromium
from common.challenges import challenge_solve, zero_bits
from stack.config import ROOT

pytestmark = pytest.mark.system  # Debian's Chromium

WORKER = (ROOT / "orders/static/orders/pow-worker.js").read_text()


@pytest.fixture(scope="module")
def ask():
    """Send a message to the worker (from a blob: no server needed); its last answer."""
    with chromium() as browser:
        page = browser.new_page()
        page.set_content("<html><body></body></html>")

        def send(message: dict) -> dict:
            return page.evaluate("""([source, message]) => new Promise((resolve, reject) => {
                const url = URL.createObjectURL(new Blob([source], {type: "text/javascript"}));
                const worker = new Worker(url);
                worker.onerror = (e) => reject(new Error(e.message));
                worker.onmessage = (e) => {
                  if (e.data.hex !== undefined || e.data.solution !== undefined) {
                    worker.terminate(); resolve(e.data);
                  }
                };
                worker.postMessage(message);
              })""", [WORKER, message])

        yield send


@pytest.mark.parametrize("length", [0, 1, 55, 56, 63, 64, 65, 119, 120, 200])
def test_its_sha256_is_pythons(ask, length):
    text = "".join(chr(ord("a") + i % 26) for i in range(length))
    assert ask({"digest": text})["hex"] == hashlib.sha256(text.encode()).hexdigest()


def test_its_solution_is_the_first_nonce_the_server_accepts(ask):
    challenge = "eyJhIjoxfQ.challenge-" + json.dumps([1, 2])  # any text: the checker signs, not solves
    bits = 12
    answer = ask({"challenge": challenge, "bits": bits})
    assert zero_bits(hashlib.sha256(answer["solution"].encode()).digest()) >= bits
    assert answer["solution"] == challenge_solve(challenge, bits)
    assert answer["tried"] == int(answer["solution"].rpartition(":")[2]) + 1
