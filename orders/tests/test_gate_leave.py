"""``manage.py gate_leave``: the gate's sales of the default's products handed to the
database, and (``--after``) only once the stack's cue says no instance sells under
the gate any more: the command starts before the last one stops, and waits."""

from __future__ import annotations

import re
import threading

import pytest
from django.core.management import CommandError, call_command
from django.test import override_settings

from orders.gate.lifecycle import gate_listed
from orders.reset import sale_reset
from stack.control import HANDED_OVER

from .test_gate import buy, persist

pytestmark = pytest.mark.django_db(transaction=True)


@override_settings(FLASHSALE_STRATEGY="gate")
def test_the_gates_sales_are_handed_over_only_once_its_cue_is_there(tmp_path, capsys):
    sale_reset(sku="sku-1", stock=5)
    buy("k1")
    persist()
    cue = tmp_path / "gate-stopped"
    with pytest.raises(CommandError, match="not there within"):
        call_command("gate_leave", after=cue, within=0.2)
    assert gate_listed() == ["sku-1"]  # nothing handed over without the cue
    timer = threading.Timer(0.3, cue.touch)
    timer.start()
    call_command("gate_leave", after=cue, within=5)
    timer.join()
    # Its last line, which a switch of the stack lifts its barrier on (stack/control.py).
    said = capsys.readouterr().out.splitlines()[-1]
    waited = re.fullmatch(rf"{HANDED_OVER} sku-1 \(1 in [\d.]+ s, after ([\d.]+) s waiting for its cue\)",
                          said)
    assert waited and float(waited[1]) >= 0.3, said  # the timer's
    assert gate_listed() == []
