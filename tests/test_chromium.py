"""The headless Chromium of the browser tests and the race-watch benchmark
(``benchmarks.race_watch.chromium``), without the stack: Playwright's own switches
kept, and nothing drawn for a new context but its page."""

from __future__ import annotations

import psutil
import pytest

from benchmarks.race_watch import chromium

pytestmark = pytest.mark.system  # Debian's Chromium


@pytest.fixture(scope="module")
def browser():
    with chromium() as browser:
        yield browser


def browser_command_line(browser) -> list[str]:
    """The command line of ``browser``'s own process, found by the PID it reports
    itself: another test's browser may be running under this pytest too."""
    processes = browser.new_browser_cdp_session().send("SystemInfo.getProcessInfo")["processInfo"]
    [pid] = [process["id"] for process in processes if process["type"] == "browser"]
    return psutil.Process(pid).cmdline()


def test_the_features_playwright_turns_off_stay_off(browser):
    # Chromium reads only the last --disable-features: each one before it (Playwright's,
    # however its next release changes it) must be part of that last one.
    line = browser_command_line(browser)
    given = [set(a.removeprefix("--disable-features=").split(",")) for a in line
             if a.startswith("--disable-features=")]
    assert len(given) >= 1
    for earlier in given[:-1]:
        assert earlier <= given[-1], earlier - given[-1]


def test_a_new_context_draws_its_page_and_no_browser_ui(browser):
    context = browser.new_context()
    try:
        page = context.new_page()
        page.set_content("<p>hello</p>")
        session = browser.new_browser_cdp_session()
        targets = session.send("Target.getTargets")["targetInfos"]
    finally:
        context.close()
    # The omnibox popup's WebUI (chrome://omnibox-popup.top-chrome/) cost more CPU a
    # context than its page; nobody sees it in a headless browser.
    assert [t["url"] for t in targets if t["type"] != "page"] == []
    assert [t["type"] for t in targets] == ["page"]
