"""``manage.py gate_leave``: the gate's sales of the default's products handed to the
database, and (``--after``) only once the stack's cue says no instance sells under
the gate any more: the command starts before the last one stops, and waits."""

from __future__ import annotations

import io
import re
import threading
import time

import pytest
from django.core.management import CommandError, call_command
from django.test import override_settings

from common.testing import start_thread
from orders.gate.lifecycle import gate_listed
from orders.reset import sale_reset
from stack.control import HANDED_OVER

from .test_gate import buy, persist

pytestmark = pytest.mark.django_db(transaction=True)


class Said(io.StringIO):
    """A command's output; ``waiting`` is set once it says it waits for its cue."""

    def __init__(self) -> None:
        super().__init__()
        self.waiting = threading.Event()

    def write(self, text: str) -> int:
        written = super().write(text)
        if text.startswith("waiting for "):
            self.waiting.set()
        return written


@override_settings(FLASHSALE_STRATEGY="gate")
def test_the_gates_sales_are_handed_over_only_once_its_cue_is_there(tmp_path):
    sale_reset(sku="sku-1", stock=5)
    buy("k1")
    persist()
    cue = tmp_path / "gate-stopped"
    with pytest.raises(CommandError, match="not there within"):
        call_command("gate_leave", after=cue, within=0.2)
    assert gate_listed() == ["sku-1"]  # nothing handed over without the cue
    # The cue comes 0.3 s after the command says it waits (its clock started before):
    # then, and not on a timer started before the command, it has waited that long.
    said = Said()
    command, box = start_thread(lambda: call_command("gate_leave", after=cue, within=30, stdout=said))
    assert said.waiting.wait(30), said.getvalue()
    time.sleep(0.3)
    assert gate_listed() == ["sku-1"]  # still waiting
    cue.touch()
    command.join()
    assert "error" not in box, box
    # Its last line, which a switch of the stack lifts its barrier on (stack/control.py).
    last = said.getvalue().splitlines()[-1]
    waited = re.fullmatch(rf"{HANDED_OVER} sku-1 \(1 in [\d.]+ s, after ([\d.]+) s waiting for its cue\)",
                          last)
    assert waited and float(waited[1]) >= 0.3, last
    assert gate_listed() == []
