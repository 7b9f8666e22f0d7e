"""Every scenario in the catalog, both halves: the broken variant must still break
and the fix must still hold. A broken half that stops breaking fails here."""

import pytest
from django.conf import settings

from scenarios.__main__ import markdown
from scenarios.base import render
from scenarios.catalog import CATALOG
from scenarios.context import Context
from stack.config import ROOT


@pytest.mark.django_db(transaction=True)  # S12 and S16 commit for real, from several threads
@pytest.mark.parametrize("scenario", CATALOG.values(), ids=CATALOG.keys())
def test_the_broken_variant_breaks_and_the_fix_holds(scenario, stack_config, stack_apps):
    # The test Redis and ZooKeeper; scenarios that buy go through the running stack.
    ctx = Context(settings.TEST_REDIS_URL, zk_hosts=settings.ZOOKEEPER_HOSTS,
                  base_url=stack_config.base_url, admin_token=stack_config.admin_token(),
                  apps=stack_apps)
    try:
        outcome = scenario.run(ctx)
    finally:
        ctx.close()
    table = render(scenario, outcome)
    assert outcome.broken.failed, table
    assert not outcome.fixed.failed, table
    assert table.endswith(f"{scenario.id}: as the seed says: broken variant breaks, fix holds")


def test_the_catalog_document_is_up_to_date():
    assert (ROOT / "docs" / "scenarios.md").read_text() == markdown() + "\n", \
        "regenerate it: python -m scenarios --markdown > docs/scenarios.md"
