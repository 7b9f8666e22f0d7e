from benchmarks.capacity_plan import PerPurchase, cores, plan, table

SPREAD = {"atomic": PerPurchase(apps=1912, mariadb=542, redis=133, persisters=40),
          "gate": PerPurchase(apps=965, mariadb=175, redis=132, persisters=322)}


def test_a_parts_cores_are_the_rate_times_its_cpu_each_core_three_quarters_busy():
    assert cores(10_000, 965) == 13  # 9.65 cores of work, at 75 %: 12.9
    assert cores(10_000, 75) == 1  # exactly one core at 75 %
    assert cores(10_000, 76) == 2


def test_the_plan_sizes_every_part_of_both_designs_for_each_rate():
    rows = plan(SPREAD, shard_ceiling=26_104, rates=(10_000, 200_000))
    assert [row[:2] for row in rows] == [["10,000", "atomic"], ["10,000", "gate"],
                                         ["200,000", "atomic"], ["200,000", "gate"]]
    atomic, gate = rows[2], rows[3]
    assert atomic[2:] == ["510", "36 core(s) of the cache's Redis", "–", "145"]
    # 200,000 over 75 % of 26,104 a shard: 10.2, so 11 shards.
    assert gate[2:] == ["258", "11 shards (a primary and its replica each)", "86", "47"]
    assert rows[1][3] == "1 shard (a primary and its replica each)"


def test_the_table_states_its_assumptions_before_its_rows():
    text = table(SPREAD, shard_ceiling=26_104)
    assert text.index("Assumed:") < text.index("| purchases a second |")
    assert text.count("\n| ") == 1 + 6  # the head, then three rates of two designs
