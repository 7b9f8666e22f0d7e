"""The README's "one purchase, file by file" is the path a purchase takes. One purchase
a path (the gate, ``atomic``, a lock: ``setnx``) is sent through the WSGI application
the instances serve, in this process, against the lane's MariaDB and Redis, with a
profiler hook (``sys.setprofile``) noting each of the shop's modules it enters; in the
order it first enters them, they are exactly the modules the README's walk names for
that path. ``common/`` and ``locking/`` serve every path and are left out of both.

The same hook measures how deep the purchase goes: from ``order_create``, the service
the door calls, down to the deepest of the project's own functions it runs (``common``
and ``locking`` counted), at most ``DEEPEST`` frames."""

import json
import re
import sys
import time
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model
from django.test import RequestFactory

from buyers.tokens import token_issue
from orders.reset import sale_reset
from orders.wsgi import PurchaseWSGIHandler

ROOT = Path(__file__).resolve().parent.parent
SHARED = ("common/", "locking/")
# Frames of the project's own code on the stack under one purchase, ``order_create``
# the first: a reader follows a purchase down at most this many calls.
DEEPEST = 7


def named(text: str) -> list[str]:
    """The modules ``text`` names in bold (``**`orders/purchase.py`**``), first mention first."""
    modules = re.findall(r"\*\*`([\w/]+\.py)`\*\*", text)
    return list(dict.fromkeys(m for m in modules if not m.startswith(SHARED)))


def walks() -> dict[str, list[str]]:
    """Each path's modules as the README's walk names them: the steps every purchase
    starts with, the path's own (not what a persister does "later"), the ending. The
    lock path is ``atomic``'s step 3 and its own step 4, as its text says."""
    readme = (ROOT / "README.md").read_text()
    section = readme.split("### One purchase, file by file")[1].split("\nA product has one segment")[0]
    start, rest = section.split("**The gate**", 1)
    gate, rest = rest.split("**`atomic` on one segment**", 1)
    atomic, rest = rest.split("**Every other strategy**", 1)
    locked, end = rest.split("**Every purchase ends**", 1)
    gate = re.sub(r"\n4\. Later,.*?(?=\n\n|\Z)", "", gate, flags=re.S)
    atomic_step_3 = atomic.split("\n4. ")[0]
    return {"gate": named(start + gate + end), "atomic": named(start + atomic + end),
            "setnx": named(start + atomic_step_3 + locked + end)}


def _module(frame) -> str | None:
    """The project module ``frame`` runs in (``orders/purchase.py``), or None: not the project's."""
    path = Path(frame.f_code.co_filename)
    if path.suffix == ".py" and path.is_relative_to(ROOT) and ".venv" not in path.parts \
            and path != Path(__file__).resolve():
        return str(path.relative_to(ROOT))
    return None


# A comprehension runs in a frame of its own before Python 3.12 (PEP 709 inlines it):
# not a call a reader follows.
COMPREHENSIONS = {"<listcomp>", "<dictcomp>", "<setcomp>", "<genexpr>"}


def _chain(frame) -> list[str] | None:
    """The project's frames from ``order_create`` down to ``frame`` (``module:function``),
    or None: ``frame`` does not run under ``order_create``."""
    chain = []
    while frame is not None:
        if (module := _module(frame)) is not None and frame.f_code.co_name not in COMPREHENSIONS:
            chain.append(f"{module}:{frame.f_code.co_name}")
            if chain[-1] == "orders/purchase.py:order_create":
                return chain[::-1]
        frame = frame.f_back
    return None


class Traced:
    """What ``call`` did under the hook: the shop's modules it entered, first entry
    first, and its deepest chain of project frames under ``order_create``."""

    def __init__(self, call):
        self.modules: dict[str, None] = {}
        self.deepest: list[str] = []
        sys.setprofile(self._profile)
        try:
            call()
        finally:
            sys.setprofile(None)

    def _profile(self, frame, event, arg):
        if event != "call" or (module := _module(frame)) is None:
            return
        if not module.startswith(SHARED):
            self.modules.setdefault(module)
        chain = _chain(frame)
        if chain is not None and len(chain) > len(self.deepest):
            self.deepest = chain


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("strategy", ["gate", "atomic", "setnx"])
def test_one_purchase_enters_the_readmes_modules_in_order_and_goes_seven_deep(strategy, settings):
    # The warm-up's resolve is remembered for the traced purchase however slow the
    # machine (past the memory, the traced one would read the sale's state first).
    settings.FLASHSALE_STRATEGY_MEMORY_S = 600.0
    get_user_model().objects.create_user("ann", password="a long passphrase")
    token = token_issue(username="ann", now=time.time()).token
    sku = f"trace-{strategy}"
    sale_reset(sku=sku, stock=5, strategy=strategy)
    handler = PurchaseWSGIHandler()
    answers = []

    def buy(key: str) -> None:
        environ = RequestFactory().generic(
            "POST", "/api/orders", json.dumps({"sku": sku, "quantity": 1}), content_type="application/json",
            HTTP_IDEMPOTENCY_KEY=key, HTTP_AUTHORIZATION=f"Bearer {token}").environ
        body = b"".join(handler(environ, lambda status, headers, exc_info=None: answers.append(status)))
        assert answers[-1].startswith("201"), (answers[-1], body)

    buy("warm-up")  # imports, the URLconf, connections, the sale's script loaded
    traced = Traced(lambda: buy("traced"))
    assert list(traced.modules) == walks()[strategy]
    assert len(traced.deepest) <= DEEPEST, "\n".join(traced.deepest)
