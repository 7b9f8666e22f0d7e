"""Every scenario in the catalog, both halves: the broken variant must still break
and the fix must still hold. A broken half that stops breaking fails here."""

import pytest
from django.conf import settings

from scenarios.__main__ import PAGE, page_written
from scenarios.base import render, render_markdown
from scenarios.catalog import CATALOG
from scenarios.context import Context
from stack.config import ROOT

# Run alone (exclusive): they read a count of the whole MariaDB server (InnoDB's
# deadlocks), which make test's other pytest run moves meanwhile.
SERVER_TOTALS = {"S12"}


@pytest.mark.django_db(transaction=True)  # S12 and S16 commit for real, from several threads
@pytest.mark.parametrize("scenario", [
    pytest.param(s, id=s.id, marks=[pytest.mark.exclusive] if s.id in SERVER_TOTALS else [])
    for s in CATALOG.values()])
def test_the_broken_variant_breaks_and_the_fix_holds(scenario, stack_config, stack_apps):
    # The test Redis and ZooKeeper; scenarios that buy go through the running stack.
    ctx = Context(settings.TEST_REDIS_URL, zk_hosts=settings.ZOOKEEPER_HOSTS,
                  base_url=stack_config.base_url, admin_token=stack_config.admin_token(),
                  buyer_auth=stack_config.buyer_auth, apps=stack_apps)
    try:
        outcome = scenario.run(ctx)
    finally:
        ctx.close()
    table = render(scenario, outcome)
    assert outcome.broken.failed, table
    assert not outcome.fixed.failed, table
    assert table.endswith(f"{scenario.id}: as the source says: broken variant breaks, fix holds")
    docs = render_markdown(scenario, outcome).splitlines()
    assert docs[0] == f"### {scenario.id}: {scenario.title}"
    assert docs[-1] == "| shows the failure | yes | no |"
    assert all(line.count("|") - line.count("\\|") == 4 for line in docs[2:]), docs  # 3 cells a row


def test_the_scenarios_page_holds_the_catalogue_as_the_code_has_it():
    page = PAGE.read_text()
    assert page == page_written(page), "write it again: python -m scenarios --markdown"
    assert all(f"## {s.id}: {s.title}" in page for s in CATALOG.values())


def test_the_measured_tables_the_docs_include_cover_the_whole_catalog():
    measured = (ROOT / "docs" / "results" / "measured" / "scenarios.md").read_text()
    assert measured.startswith("Measured by `python -m scenarios all --docs`")
    headings = [line for line in measured.splitlines() if line.startswith("### ")]
    assert headings == [f"### {s.id}: {s.title}" for s in CATALOG.values()], \
        "regenerate it: make scenarios SCENARIO_ARGS=--docs"
