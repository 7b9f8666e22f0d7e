"""``make race``'s own logic on fixtures: the progress line and the final table."""

import io

from loadtest.race import COLUMNS, follow, progress_line
from loadtest.report import markdown_table


def lane(strategy, orders, stock=100, **figures):
    return {"strategy": strategy, "sku": f"race-{strategy}", "stock": stock, "remaining": 0, "orders": orders,
            "sold_out": 1000 - orders, "busy": 0, "errors": 0, "oversold": max(0, orders - stock),
            "lost_updates": 0, "consistent": orders <= stock, "orders_per_s": 52.4, "p50_ms": 91.2,
            "p99_ms": 1234.5, "verdict": "held" if orders <= stock else f"oversold by {orders - stock}",
            "series": []} | figures


def race(status="running", answered=500):
    return {"id": 3, "status": status, "answered": answered, "total": 2000, "elapsed_s": 2.5,
            "lanes": [lane("none", 137), lane("atomic", 100)], "error": None}


def test_the_progress_line_shows_the_share_answered_and_marks_oversell():
    line = progress_line(race())
    assert line.startswith("[#######.......................]  25%   2.5s")
    assert "none 137 (oversold 37)" in line and "atomic 100" in line and "atomic 100 (" not in line


def test_the_table_has_a_row_per_strategy_with_its_verdict():
    table = markdown_table(race()["lanes"], COLUMNS).splitlines()
    assert table[0].startswith("| strategy | orders / stock | oversold |")
    assert table[2] == ("| none | 137 / 100 | 37 | 0 | BROKEN | 863 | 0 | 0 | 52 | 91/1,234 "
                        "| oversold by 37 |")
    assert table[3].endswith("| held |")


def test_following_stops_at_the_end_and_prints_the_last_state():
    states = iter([race(), race(answered=1500), race("finished", 2000)])

    class Client:
        def race(self, race_id):
            class Response:
                def raise_for_status(self):
                    pass

                def json(self):
                    return next(states)

            return Response()

    out = io.StringIO()
    final = follow(Client(), 3, out=out)
    assert final["status"] == "finished" and "100%" in out.getvalue()
