"""A link fault answers what a sale asks of any fault (``chaos.faults.Fault``)."""

import dataclasses

from chaos.faults import FAULTS, Fault
from verdicts.links import LINK_FAULTS


def test_a_link_fault_has_every_attribute_a_sale_reads_of_a_fault():
    asked = {f.name for f in dataclasses.fields(Fault)} - {"name", "summary", "down_seconds"}
    for fault in LINK_FAULTS.values():
        assert all(hasattr(fault, name) for name in asked), fault.name
        assert fault.for_sale(None) is fault
    assert all(isinstance(fault, Fault) for fault in FAULTS.values())
