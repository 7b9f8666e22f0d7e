"""The getting-started page's walks by hand, run as a reader runs them: each section's
shell block against the stack, its answers held to the page's "what you see" block,
the fields that differ from run to run (ids, tokens, times, the instance) aside."""

from __future__ import annotations

import json
import re
import shutil
import subprocess

import pytest

from stack.config import ROOT

PAGE = ROOT / "docs" / "getting-started.md"
# What the page says differs from one run to the next.
VARYING = frozenset({"order_id", "instance", "as_of", "admission", "admission_expires_at", "expires_at",
                     "payment_intent"})
pytestmark = pytest.mark.e2e


def walks() -> dict[str, tuple[str, str]]:
    """Each section with a ``sh`` block and, after it, a ``text`` block: its title, both."""
    found = {}
    for section in PAGE.read_text().split("\n## ")[1:]:
        title = section.splitlines()[0]
        shell = re.search(r"^```sh\n(.*?)^```$", section, re.MULTILINE | re.DOTALL)
        seen = re.search(r"^```text\n(.*?)^```$", section, re.MULTILINE | re.DOTALL)
        if shell and seen and shell.start() < seen.start() and "curl" in shell[1]:
            found[title] = (shell[1], seen[1])
    return found


def answers(text: str) -> list[dict]:
    """The JSON values one after another, the varying fields marked as such."""
    found, at, decoder = [], 0, json.JSONDecoder()
    while at < len(text.rstrip()):
        value, end = decoder.raw_decode(text, at)
        found.append({key: "…" if key in VARYING else field for key, field in value.items()})
        at = end + len(text[end:]) - len(text[end:].lstrip())
    return found


def test_the_page_has_its_walks():
    assert list(walks()) == ["A first sale by hand", "One buyer, from the waiting room to paid"]


@pytest.mark.parametrize("title", list(walks()))
def test_a_walk_by_hand_answers_what_the_page_shows(stack_config, title):
    assert shutil.which("curl"), "the page's walks run curl (make install installs it)"
    shell, seen = walks()[title]
    script = shell.replace("http://127.0.0.1:8080", stack_config.base_url).replace(
        ".run/admin-token", str(stack_config.run_dir / "admin-token"))
    result = subprocess.run(["bash", "-euo", "pipefail", "-c", script], cwd=ROOT, capture_output=True,
                            text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert answers(result.stdout) == answers(seen), result.stdout
