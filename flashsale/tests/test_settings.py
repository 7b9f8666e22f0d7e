import os
import subprocess
import sys
from pathlib import Path

from flashsale.strategies import STRATEGIES

ROOT = Path(__file__).resolve().parents[2]


def start_django(**env) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", "import django; django.setup()"],
        cwd=ROOT, env={**os.environ, "DJANGO_SETTINGS_MODULE": "flashsale.settings.base", **env},
        capture_output=True, text=True,
    )


def test_unknown_strategy_fails_at_start_up_naming_the_choices():
    result = start_django(FLASHSALE_STRATEGY="bogus")
    assert result.returncode != 0
    assert "ImproperlyConfigured" in result.stderr
    assert f"unknown strategy 'bogus'; choose one of: {', '.join(STRATEGIES)}" in result.stderr
    assert "none, local" in result.stderr


def test_known_strategy_starts():
    assert start_django(FLASHSALE_STRATEGY="local").returncode == 0
