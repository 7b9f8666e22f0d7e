"""Measured figures live in the README and the docs, beside the command that measured
them, never in the code's comments and docstrings, where the next change leaves them
stale. A figure here is a number of microseconds or a ratio ("0.47×")."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CODE = ["flashsale", "locking", "inventory", "orders", "races", "stack", "chaos", "scenarios"]
FIGURE = re.compile(r"\d(?:[.,]\d+)?\s?(?:µs|us of CPU)|\d\.\d+\s?×|\d\.\d+x (?:ping|of)")


def test_no_module_of_the_apps_states_a_measured_figure():
    found = [f"{path.relative_to(ROOT)}:{n}: {line.strip()}"
             for folder in CODE for path in sorted((ROOT / folder).rglob("*.py")) if "tests" not in path.parts
             for n, line in enumerate(path.read_text().splitlines(), 1) if FIGURE.search(line)]
    assert found == []
