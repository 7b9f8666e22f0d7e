"""No figure typed by hand: a measured figure on a page is the output of the command
that measured it, included from the file that command wrote."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


# A measured-looking figure: a ratio ("1.8×", "0.9x ping", "1.80 times"), a rate ("7,120 req/s"), a
# CPU time ("190 µs") or a percentile's latency ("p99 540 ms").
FIGURE = re.compile(r"\b\d+(?:\.\d+)?×|\b\d+\.\d+x\b|\b\d+\.\d+ times\b"
                    r"|\d[\d,]*(?:\.\d+)?\s?(?:req/s|requests/s|orders/s|answers/s|µs|us of CPU|CPU-s)\b"
                    r"|\bp(?:50|90|95|99)\s+\d[\d,.]*\s?ms\b"
                    # a ratio in words, as a reading of a table says it
                    r"|\b(?:a (?:fifth|tenth|third|quarter)|two (?:fifths|thirds)|three quarters|twice as"
                    r"|half as|half the|(?:two|three|four|five|ten) times)\b", re.IGNORECASE)
# Not measurements: targets and rules a measurement is held to, and what a design or a
# configuration says.
ALLOWED = ("at least 0.6× ping", "at most 3× ping", "at least 0.7× ping", "the 2× the rule asks",
           "14.4 times too fast",  # the burn-rate alert's threshold
           "ping at least twice as fast as gunicorn",  # the rule for changing the default server
           "under half the stall",  # what tests/test_open_crowd.py asserts
           "half the buyers", "half as fast", "a third stack", "twice as long as the last",
           "more than half the", "a quarter of the wait", "after half the room's estimated wait",
           "over a tenth of a strategy's answers", "more than three times in ten minutes",
           "two or three times", "a tenth more for InnoDB's", "three quarters busy",
           "within three quarters of its limit", "Half the buyers", "half as their order falls due",
           "half the payers", "(`ask_again_s`): a quarter", "(`ask_again_s`: a quarter of its wait")
# The decisions page records what was measured when each choice was made, each with
# its command and its commit: history, which the measured files replace as they run.
HISTORY = {"docs/development/decisions.md", "docs/changelog.md"}


def test_no_page_types_a_measured_figure_outside_a_measured_file():
    """A figure on a page is the output of the command that measured it, included from
    the file that command wrote (docs/results/measured/, or the README's marked
    demo table), never typed beside it, where the next run leaves it stale."""
    pages = [ROOT / "README.md", *(ROOT / "docs").rglob("*.md"), *(ROOT / "deploy").rglob("*.md")]
    found = []
    for page in pages:
        name = str(page.relative_to(ROOT))
        if name.startswith(("docs/results/measured/", "docs/profile/")) or name in HISTORY:
            continue
        text = page.read_text()
        if name == "README.md":  # the demo's table, between the marks the demo writes
            text = re.sub(r"<!-- The text below is written by `python -m loadtest.demo.*?-->.*?"
                          r"<!-- The end of the text `python -m loadtest.demo[^>]*-->", "", text, flags=re.S)
        for number, line in enumerate(text.splitlines(), 1):
            rest = line
            for allowed in ALLOWED:
                rest = rest.replace(allowed, "")
            if FIGURE.search(rest):
                found.append(f"{name}:{number}: {line.strip()[:100]}")
    assert not found, "\n".join(found)
