"""Measured figures live in the README and the docs, beside the command that measured
them, never in the code's comments and docstrings, where the next change leaves them
stale. A figure here is a number of microseconds or a ratio ("0.47×"), or a share
written in words ("a sixth of its CPU", "three fifths")."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CODE = ["flashsale", "locking", "inventory", "orders", "races", "stack", "chaos", "scenarios", "common",
        "payments", "waitingroom", "buyers", "dashboard"]
FIGURE = re.compile(r"\d(?:[.,]\d+)?\s?(?:µs|us of CPU)|\d\.\d+\s?×|\d\.\d+x (?:ping|of)"
                    r"|\b(?:a|one|two|three|four|five) (?:third|quarter|fifth|sixth|seventh|eighth|tenth)s?\b"
                    r"|\bCPU\b.*\bseveral times over\b", re.IGNORECASE)


def test_no_module_of_the_apps_states_a_measured_figure():
    found = [f"{path.relative_to(ROOT)}:{n}: {line.strip()}"
             for folder in CODE for path in sorted((ROOT / folder).rglob("*.py")) if "tests" not in path.parts
             for n, line in enumerate(path.read_text().splitlines(), 1) if FIGURE.search(line)]
    assert found == []
