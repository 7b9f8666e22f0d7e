"""``python -m stack``'s command line reaches what it names."""

from pathlib import Path

import pytest

from stack import __main__ as cli
from stack import suite


@pytest.fixture(autouse=True)
def _run_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("RUN_DIR", str(tmp_path / "run"))


def test_the_docs_build_where_nginx_serves_them_unless_a_site_directory_is_given(tmp_path, monkeypatch):
    built = []
    monkeypatch.setattr(cli, "docs", lambda config, site_dir: built.append((config.run_dir, site_dir)))
    assert cli.main(["docs"]) == 0
    assert cli.main(["docs", "--site-dir", str(tmp_path / "site")]) == 0
    assert built == [(tmp_path / "run", None), (tmp_path / "run", Path(tmp_path / "site"))]


@pytest.mark.parametrize(("flags", "checks"), [([], False), (["--checks"], True)])
def test_the_suite_runs_the_checks_beside_it_when_asked(flags, checks, monkeypatch):
    asked = {}

    def main(pytest_args, **kwargs):
        asked.update(kwargs, args=pytest_args)
        return 0

    monkeypatch.setattr(suite, "main", main)
    assert cli.main(["test", *flags, "--", "-k", "x"]) == 0
    assert asked == {"lanes": 2, "store_durations": False, "burn": 0, "checks": checks, "cpu": None,
                     "args": ["-k", "x"]}
