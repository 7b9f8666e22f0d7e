"""The start-cost benchmark measures both starts both ways, and its table is its
medians' arithmetic."""

from benchmarks.start_cost import STARTS, main, table


def test_the_table_gives_each_ways_median_and_the_share_taken_off():
    rows = table({"a start": {"collected": [0.4, 0.5, 0.6], "paused": [0.3, 0.2, 0.4]}})
    assert rows[2] == "| a start | 500 | 300 | 40% |"


def test_one_run_starts_each_entry_point_both_ways(capsys):
    assert main(["--runs", "1"]) == 0
    rows = [line for line in capsys.readouterr().out.splitlines() if line.startswith("| a")]
    assert [row.split(" | ")[0].lstrip("| ") for row in rows] == list(STARTS)
    for row in rows:
        collected, paused = (float(cell) for cell in row.split(" | ")[1:3])
        assert collected > 0 and paused > 0
