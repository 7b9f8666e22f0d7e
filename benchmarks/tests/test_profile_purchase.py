"""The profile's arithmetic, on hand-made collapsed stacks (py-spy's raw format)."""

import pytest

from benchmarks.profile_purchase import top_entries

THREAD = 'process 1:"gunicorn";_bootstrap (threading.py:1002)'
VIEW = f"{THREAD};view (orders/apis.py:90)"
STACKS = f"""\
{VIEW};query (MySQLdb/connections.py:280) 6
{VIEW};is_valid (rest_framework/serializers.py:220) 3
{THREAD} 1
not a stack line
"""


def test_top_entries_share_samples_inclusive_and_self():
    total, inclusive, own = top_entries(STACKS)
    assert total == 10
    # The thread's bootstrap is in every sample: plumbing, left out of the inclusive table.
    assert inclusive[0] == ("orders/apis.py:view", pytest.approx(0.9))
    assert dict(inclusive)["MySQLdb/connections.py:query"] == pytest.approx(0.6)
    assert "threading.py:_bootstrap" not in dict(inclusive)
    assert own[:2] == [("MySQLdb/connections.py:query", pytest.approx(0.6)),
                       ("rest_framework/serializers.py:is_valid", pytest.approx(0.3))]
