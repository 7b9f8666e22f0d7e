"""Scratch Redis servers' ports (stack.scratch)."""

import pytest

from stack.scratch import BUS, ephemeral_ports, free_cluster_port


def test_a_cluster_port_and_its_bus_stay_out_of_the_ports_outgoing_connections_get():
    ephemeral = ephemeral_ports()
    assert len(ephemeral) > 1_000 and ephemeral.start >= 1_024
    for _ in range(200):
        port = free_cluster_port()
        assert port >= 10_000 and port not in ephemeral and port + BUS not in ephemeral


@pytest.mark.parametrize("ephemeral", [range(32_768, 61_000), range(15_000, 30_000), range(1_024, 65_536)])
def test_any_range_leaves_a_port_whose_bus_port_is_outside_it_or_falls_back(ephemeral):
    port = free_cluster_port(ephemeral)
    if ephemeral.start > 10_000 + BUS or ephemeral.stop < 65_536 - BUS:
        assert port not in ephemeral and port + BUS not in ephemeral
    else:  # no room outside it: any free pair
        assert 20_000 <= port <= 65_535 - BUS
