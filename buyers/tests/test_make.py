"""``manage.py buyers_make``: a load test's buyers in bulk, on the real MariaDB."""

import pytest
from django.contrib.auth import authenticate, get_user_model
from django.core.management import call_command

from buyers.tokens import token_buyer

pytestmark = pytest.mark.django_db


def test_ten_thousand_buyers_are_made_each_with_its_token_and_again_without_duplicates(tmp_path, capsys):
    out = tmp_path / "buyers.tsv"
    call_command("buyers_make", "10000", "--out", str(out), "--prefix", "lb-")
    lines = out.read_text().splitlines()
    assert len(lines) == 10_000 and "10000 buyers" in capsys.readouterr().out
    first, last = lines[0].split("\t"), lines[-1].split("\t")
    assert first[0] == "lb-0" and token_buyer(first[1]) == "lb-0"
    assert last[0] == "lb-9999" and token_buyer(last[1]) == "lb-9999"
    users = get_user_model().objects.filter(username__startswith="lb-")
    assert users.count() == 10_000
    assert authenticate(username="lb-0", password="") is None  # no password signs one in
    call_command("buyers_make", "10", "--out", str(out), "--prefix", "lb-")  # again: kept, new tokens
    assert users.count() == 10_000 and len(out.read_text().splitlines()) == 10
